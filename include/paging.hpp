// SPDX-License-Identifier: MIT
/// @file
/// @brief Every core header of paging/ in one include (freestanding): MMU roles, permissions, the guest, EPT, NPT and nested walkers, guest memory, memory images, the shadow MMU (paging/shadow/).
/// Not included: paging/hosted/ (hosted printers; include them yourself).
/// tests/freestanding checks that this lists every core header of the layer (subfolders too).
#pragma once

#include "paging/access.hpp"
#include "paging/ad_record.hpp"
#include "paging/cr_write.hpp"
#include "paging/cr_write_apply.hpp"
#include "paging/elf_core.hpp"
#include "paging/ept_entry.hpp"
#include "paging/ept_memory.hpp"
#include "paging/ept_walker.hpp"
#include "paging/guest_memory.hpp"
#include "paging/mappings.hpp"
#include "paging/memory_holder.hpp"
#include "paging/mmu.hpp"
#include "paging/nested.hpp"
#include "paging/npt.hpp"
#include "paging/pdptr.hpp"
#include "paging/permission.hpp"
#include "paging/pkru.hpp"
#include "paging/pte.hpp"
#include "paging/read_virtual.hpp"
#include "paging/region_memory.hpp"
#include "paging/reserved.hpp"
#include "paging/role.hpp"
#include "paging/role_sync.hpp"
#include "paging/shadow/fault_answer.hpp"
#include "paging/shadow/frame_map.hpp"
#include "paging/shadow/invalidate.hpp"
#include "paging/shadow/page_cache.hpp"
#include "paging/shadow/shadow_mmu.hpp"
#include "paging/shadow/spte.hpp"
#include "paging/tlb_invalidation.hpp"
#include "paging/walk_result.hpp"
#include "paging/walker.hpp"
