// SPDX-License-Identifier: MIT
/// @file
/// @brief Every core header of x86/ in one include (freestanding): the architectural vocabulary every layer shares (registers, addresses, events, results).
/// Not included: x86/hosted/ (hosted printers; include them yourself).
/// tests/freestanding checks that this lists every core header of the layer (subfolders too).
#pragma once

#include "x86/address.hpp"
#include "x86/apic_base.hpp"
#include "x86/apic_destination.hpp"
#include "x86/apic_icr.hpp"
#include "x86/apic_registers.hpp"
#include "x86/bitfield.hpp"
#include "x86/contract.hpp"
#include "x86/cr.hpp"
#include "x86/cr3.hpp"
#include "x86/cr_rules.hpp"
#include "x86/efer.hpp"
#include "x86/event.hpp"
#include "x86/exception_merge.hpp"
#include "x86/flags.hpp"
#include "x86/gpr.hpp"
#include "x86/guest_owned.hpp"
#include "x86/init_sipi.hpp"
#include "x86/ibpb.hpp"
#include "x86/instruction_skip.hpp"
#include "x86/lapic.hpp"
#include "x86/msr.hpp"
#include "x86/paging_mode.hpp"
#include "x86/pat.hpp"
#include "x86/pfec.hpp"
#include "x86/pv_send_ipi.hpp"
#include "x86/result.hpp"
#include "x86/rflags.hpp"
#include "x86/selector.hpp"
#include "x86/vector.hpp"
#include "x86/xcr0.hpp"
