// SPDX-License-Identifier: MIT
// Test support: the library's fault_kind for each outcome of the independent walk model
// (walk_model.hpp stays free of hvkit headers, so the mapping lives here).
#pragma once

#include <hvkit/paging/walk_result.hpp>

#include "walk_model.hpp"

namespace walk_test {
inline hvkit::paging::fault_kind to_kind(walk_model::kind k) {
  using hvkit::paging::fault_kind;
  switch (k) {
    case walk_model::kind::not_present: return fault_kind::not_present;
    case walk_model::kind::reserved: return fault_kind::reserved_bit;
    case walk_model::kind::permission: return fault_kind::permission;
    case walk_model::kind::pkey: return fault_kind::protection_key;
    case walk_model::kind::unbacked: return fault_kind::unbacked;
    case walk_model::kind::non_canonical: return fault_kind::non_canonical;
    case walk_model::kind::ok: break;
  }
  return fault_kind::none;
}
}  // namespace walk_test
