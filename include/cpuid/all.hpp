/// @file
/// @brief Everything of cpuid/ in one include (freestanding): the model, host reading and
/// decoding, the guest policy and the MSR policy derived from it.
#pragma once

#include <cpuid/decode.hpp>
#include <cpuid/features.hpp>
#include <cpuid/host.hpp>
#include <cpuid/kvm.hpp>
#include <cpuid/leaf.hpp>
#include <cpuid/msr_policy.hpp>
#include <cpuid/policy.hpp>
#include <cpuid/presets.hpp>
#include <cpuid/rules.hpp>
#include <cpuid/table.hpp>
#include <cpuid/topology.hpp>
#include <cpuid/xsave.hpp>
