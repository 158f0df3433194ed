// SPDX-License-Identifier: MIT
/// @file
/// @brief Every core header of svm/ in one include (freestanding): AMD SVM: VMCB fields, intercepts, exit codes and decodings, event injection, VMRUN checks.
/// Not included: svm/hosted/ (hosted printers; include them yourself).
/// tests/freestanding checks that this lists every core header of the layer (subfolders too).
#pragma once

#include "svm/clean_bits.hpp"
#include "svm/controls.hpp"
#include "svm/cr_access.hpp"
#include "svm/cr_intercepts.hpp"
#include "svm/cr_write_apply.hpp"
#include "svm/event_injection.hpp"
#include "svm/exit_code.hpp"
#include "svm/exit_info.hpp"
#include "svm/ibpb.hpp"
#include "svm/init_sipi.hpp"
#include "svm/intercepts.hpp"
#include "svm/io_permission_map.hpp"
#include "svm/apic_msrpm.hpp"
#include "svm/msr_permission_map.hpp"
#include "svm/npt_invalidation.hpp"
#include "svm/npf.hpp"
#include "svm/register_file.hpp"
#include "svm/segment.hpp"
#include "svm/skip.hpp"
#include "svm/tlb.hpp"
#include "svm/vcpu_asid.hpp"
#include "svm/vmcb.hpp"
#include "svm/vmcb_field.hpp"
#include "svm/vmcb_fields.hpp"
#include "svm/vmrun_checks.hpp"
