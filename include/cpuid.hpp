// SPDX-License-Identifier: MIT
/// @file
/// @brief Every core header of cpuid/ in one include (freestanding): the CPUID model, host decoding, the guest policy and the MSR policy derived from it.
/// Not included: cpuid/hosted/ (hosted printers; include them yourself).
/// tests/freestanding checks that this lists every core header of the layer (subfolders too).
#pragma once

#include "cpuid/decode.hpp"
#include "cpuid/features.hpp"
#include "cpuid/guest_cpu_model.hpp"
#include "cpuid/host.hpp"
#include "cpuid/kvm.hpp"
#include "cpuid/leaf.hpp"
#include "cpuid/msr_policy.hpp"
#include "cpuid/policy.hpp"
#include "cpuid/presets.hpp"
#include "cpuid/rules.hpp"
#include "cpuid/svm.hpp"
#include "cpuid/table.hpp"
#include "cpuid/topology.hpp"
#include "cpuid/xsave.hpp"
