// SPDX-License-Identifier: MIT
/// @file
/// @brief Everything of cpuid/ in one include (freestanding): the model, host reading and
/// decoding, the guest policy and the MSR policy derived from it.
#pragma once

#include "decode.hpp"
#include "features.hpp"
#include "guest_cpu_model.hpp"
#include "host.hpp"
#include "kvm.hpp"
#include "leaf.hpp"
#include "msr_policy.hpp"
#include "policy.hpp"
#include "presets.hpp"
#include "rules.hpp"
#include "table.hpp"
#include "topology.hpp"
#include "xsave.hpp"
