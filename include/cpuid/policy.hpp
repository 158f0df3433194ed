// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest CPUID policy: host features intersected with what the hypervisor
/// supports and with the user's configuration, normalized by the rules of rules.hpp, and
/// the answer to a guest's CPUID exit.
///
/// @code
///   cpuid::table<> host;
///   cpuid::read_all(cpuid::host_source{}, host);
///   auto p = cpuid::build_policy(host, caps, config);       // once per VM
///   regs r = p->answer(leaf, subleaf, vcpu_state);          // on every CPUID exit
/// @endcode
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "decode.hpp"
#include "features.hpp"
#include "kvm.hpp"
#include "leaf.hpp"
#include "rules.hpp"
#include "svm.hpp"
#include "table.hpp"
#include "topology.hpp"
#include "xsave.hpp"
#include "../x86/cr.hpp"
#include "../x86/result.hpp"
#include "../x86/xcr0.hpp"

namespace hvkit::cpuid {

/// What the hypervisor can offer.
struct hypervisor_caps {
  /// Host features the hypervisor lets the guest use as they are (the host must have them).
  feature_set passthrough{};
  /// Features the hypervisor implements itself: offered whether or not the host has them
  /// (x2APIC and TSC-deadline from a virtual APIC, the KVM paravirtual features, ...).
  feature_set emulated{};
  /// XSAVE components the hypervisor context-switches for the guest.
  x86::xfeatures xsave_components = x86::xfeatures{~std::uint64_t{0}};
  /// The hypervisor can run a nested hypervisor (VMX/SVM for the guest).
  bool nested_virtualization = false;
  /// With nested SVM: the Fn8000_000A features, revision and ASIDs it implements for the
  /// guest (svm.hpp; none by default: a feature reaches the guest only if implemented).
  svm_nested_caps svm{};
};

/// The user's choices for one VM.
struct policy_config {
  /// Features to hide even when host and hypervisor have them.
  feature_set deny{};
  /// Offer nested virtualization (only if the hypervisor can).
  bool nested_virtualization = false;
  /// Set CPUID.1:ECX[31] and provide the KVM paravirtual leaves.
  bool announce_hypervisor = true;
  /// Base of the KVM leaves: 0x40000000, or 0x40000100 with Hyper-V leaves below.
  std::uint32_t kvm_base = kvm::default_base;
  /// The guest's IPIs are accelerated by the processor (AVIC, or VMX IPI virtualization):
  /// KVM_FEATURE_PV_SEND_IPI is then withheld (rule pv_send_ipi).
  bool ipi_accelerated = false;
  /// Initial hints (only the kvm_hints word is used). Hints may change later: set_hints().
  feature_set hints{};
  /// XSAVE components the VM may use (XCR0 and IA32_XSS bits).
  x86::xfeatures xsave_components = x86::xfeatures{~std::uint64_t{0}};
  topology topo{};
  /// Highest basic leaf the guest sees (leaves above it are removed).
  std::uint32_t max_basic_leaf = 0x1f;
};

/// The per-vCPU state the dynamic rules read when answering a CPUID exit.
struct vcpu_state {
  x86::cr4 cr4{};                  ///< the guest's CR4 (as the guest sees it)
  x86::xfeatures xcr0{1};          ///< the guest's XCR0 (reset value: x87 only)
  x86::xfeatures xss{};            ///< the guest's IA32_XSS
  std::uint32_t x2apic_id = 0;
};

enum class policy_error : std::uint8_t {
  none,
  table_full,         ///< the guest table's capacity was exceeded
  bad_kvm_base,       ///< kvm_base not 0x40000000 + n * 0x100
  bad_topology,       ///< topology counts out of range
  bad_max_leaf,       ///< max_basic_leaf below 1 (leaf 1 is architectural)
  no_basic_leaves,    ///< the host table lacks leaf 0 or 1
  xsave_layout,       ///< the exposed XSAVE components cannot be laid out (sizes past 4 GiB)
  no_kvm_leaves,      ///< set_hints() on a policy without KVM leaves
  not_hypervisor_leaf,///< set_leaf() outside the free part of the hypervisor range
};

namespace detail {
/// Bit k set if leaf base + k is indexed (k < 64): the policy's index tests one bit.
[[nodiscard]] constexpr std::uint64_t indexed_mask(std::uint32_t base) noexcept {
  std::uint64_t m = 0;
  for (std::uint32_t k = 0; k < 64; ++k)
    if (is_indexed(base + k)) m |= std::uint64_t{1} << k;
  return m;
}
}  // namespace detail

/// Capacity of a guest table.
inline constexpr std::size_t policy_capacity = 128;

/// A built guest CPUID policy. Build it with build_policy(); afterwards its features are
/// fixed (stable across migration), only the hints may change.
class policy {
 public:
  using table_type = table<policy_capacity>;

  /// The stored (static) table: dynamic bits hold their reset-state values.
  [[nodiscard]] constexpr const table_type& leaves() const noexcept { return table_; }
  [[nodiscard]] constexpr vendor cpu_vendor() const noexcept { return vendor_; }
  /// The exposed features (dynamic bits OSXSAVE/OSPKE excluded; hints excluded).
  [[nodiscard]] constexpr const feature_set& features() const noexcept { return features_; }
  [[nodiscard]] constexpr bool has(feature f) const noexcept { return features_.test(f); }
  [[nodiscard]] constexpr std::uint32_t kvm_base() const noexcept { return kvm_base_; }
  [[nodiscard]] constexpr bool has_kvm_leaves() const noexcept { return kvm_leaves_; }
  /// Exposed XCR0 and IA32_XSS components.
  [[nodiscard]] constexpr x86::xfeatures xcr0_components() const noexcept { return xcr0_; }
  [[nodiscard]] constexpr x86::xfeatures xss_components() const noexcept { return xss_; }
  [[nodiscard]] constexpr const xsave_layout& xsave() const noexcept { return layout_; }
  /// Host components withheld from the guest because the host's CPUID.0xD sub-leaf for them
  /// contradicts its own XCR0/IA32_XSS bitmaps (rule feature_dependencies); features that
  /// need them are hidden with them. The reason for each is xsave_issue().
  [[nodiscard]] constexpr x86::xfeatures xsave_withheld() const noexcept { return withheld_; }
  /// Why component `i` was withheld (`consistent` if it was not, or i is out of range).
  [[nodiscard]] constexpr xsave_enumeration xsave_issue(unsigned i) const noexcept {
    return i < xsave_max_components ? xsave_issues_[i] : xsave_enumeration::consistent;
  }
  [[nodiscard]] constexpr const topology& topo() const noexcept { return topo_; }

  /// The current hints word (EDX of base+1).
  [[nodiscard]] constexpr std::uint32_t hints() const noexcept {
    return kvm_leaves_ ? table_.get(kvm_base_ + 1).edx : 0u;
  }
  /// Replaces the hints (e.g. after migration to a host with or without APICv/AVIC).
  /// Only the kvm_hints word of `h` is used; the features cannot change.
  constexpr result<void, policy_error> set_hints(const feature_set& h) noexcept {
    if (!kvm_leaves_) return unexpected(policy_error::no_kvm_leaves);
    regs* r = table_.find(kvm_base_ + 1);
    if (r == nullptr) return unexpected(policy_error::no_kvm_leaves);
    r->edx = h.get(word::kvm_hints);
    return {};
  }
  /// Adds or replaces a leaf in the hypervisor range outside the KVM block (for example
  /// Hyper-V leaves below a KVM base of 0x40000100).
  constexpr result<void, policy_error> set_leaf(std::uint32_t leaf, std::uint32_t subleaf, const regs& v) noexcept {
    if (leaf_class(leaf) != leaves::hypervisor_base) return unexpected(policy_error::not_hypervisor_leaf);
    if (kvm_leaves_ && leaf >= kvm_base_ && leaf <= kvm_base_ + 0xff) return unexpected(policy_error::not_hypervisor_leaf);
    if (!table_.set(leaf, subleaf, v)) return unexpected(policy_error::table_full);
    reindex();
    return {};
  }

  /// The stored registers of (leaf, subleaf), or nullptr: O(1) for basic leaves below 64
  /// and extended leaves below 0x80000040 (a direct index), a binary search otherwise.
  /// Always inlined: answer() is an inline function that every translation unit using it
  /// emits, and the linker keeps one copy; with the lookup left to each unit's inlining
  /// heuristics, which copy that was (i.e. the link order) decided whether a CPUID exit paid
  /// a call here.
  [[nodiscard, gnu::always_inline]] constexpr const regs* find(std::uint32_t leaf, std::uint32_t subleaf) const noexcept {
    std::size_t i = 0, n = 0;
    bool indexed = false;
    if (leaf < index_span) {
      i = basic_first_[leaf];
      n = basic_count_[leaf];
      indexed = ((basic_indexed >> leaf) & 1u) != 0;
    } else if (leaf - leaves::ext_max < index_span) {
      const std::uint32_t k = leaf - leaves::ext_max;
      i = ext_first_[k];
      n = ext_count_[k];
      indexed = ((ext_indexed >> k) & 1u) != 0;
    } else {
      return table_.find(leaf, subleaf);
    }
    if (n == 0) return nullptr;
    if (!indexed) return &table_[i].value;
    if (subleaf < n && table_[i + subleaf].subleaf == subleaf) return &table_[i + subleaf].value;  // no holes
    for (std::size_t j = i; j < i + n; ++j)
      if (table_[j].subleaf == subleaf) return &table_[j].value;
    return nullptr;
  }

  /// The answer to CPUID(leaf, subleaf) executed by a vCPU in state `v` (the dynamic rules
  /// applied). Undefined leaves follow the vendor: in range, all zeros; above the range's
  /// maximum, Intel answers with the highest basic leaf and AMD with zeros (SDM Vol. 2A
  /// CPUID, "If a value entered for CPUID.EAX is higher than the maximum input value...";
  /// APM vol. 3 E.2).
  [[nodiscard]] constexpr regs answer(std::uint32_t leaf, std::uint32_t subleaf, const vcpu_state& v) const noexcept {
    // The defined leaves (what a guest asks for) inline: the lookup and the dynamic rules.
    // Undefined leaves go to one out-of-line function, the same in every translation unit.
    if (const regs* r = find(leaf, subleaf)) {
      regs out = *r;
      patch(leaf, subleaf, out, v);
      return out;
    }
    return answer_undefined(leaf, subleaf, v);
  }

 private:
  template <std::size_t N>
  friend constexpr result<void, policy_error> build_policy_into(policy&, const table<N>&, const hypervisor_caps&,
                                                                const policy_config&) noexcept;

  /// answer() for a leaf the table does not hold (see answer()).
  [[nodiscard, gnu::noinline, gnu::cold]] constexpr regs answer_undefined(std::uint32_t leaf, std::uint32_t subleaf,
                                                                        const vcpu_state& v) const noexcept {
    if (!in_range(leaf)) {
      if (is_amd_like(vendor_)) return {};
      leaf = max_basic_;
      if (const regs* r = find(leaf, subleaf)) {
        regs out = *r;
        patch(leaf, subleaf, out, v);
        return out;
      }
    }
    regs out{};
    if (leaf == leaves::ext_topology || leaf == leaves::v2_ext_topology) {
      // Past the last level: ECX[7:0] echoes the level number, the type is invalid (0),
      // EDX is still the x2APIC ID (SDM Vol. 2A CPUID leaf 0BH).
      out.ecx = subleaf & 0xffu;
      out.edx = v.x2apic_id;
    }
    return out;
  }

  [[nodiscard]] constexpr bool in_range(std::uint32_t leaf) const noexcept {
    switch (leaf_class(leaf)) {
      case 0: return leaf <= max_basic_;
      case leaves::ext_max: return has_ext_ && leaf <= max_ext_;
      case leaves::hypervisor_base: {
        const regs* sig = table_.find(leaf & ~0xffu);
        return sig != nullptr && leaf <= sig->eax && sig->eax <= (leaf | 0xffu);
      }
      default: return false;
    }
  }

  static constexpr std::uint32_t index_span = 64;
  static_assert(policy_capacity <= 0xff, "entry positions and counts must fit the index");
  static constexpr std::uint64_t basic_indexed = detail::indexed_mask(0);
  static constexpr std::uint64_t ext_indexed = detail::indexed_mask(leaves::ext_max);

  /// Rebuilds the direct index (first entry and entry count per leaf) after the table
  /// changed shape.
  constexpr void reindex() noexcept {
    basic_first_.fill(0);
    basic_count_.fill(0);
    ext_first_.fill(0);
    ext_count_.fill(0);
    for (std::size_t j = table_.size(); j-- > 0;) {
      const std::uint32_t l = table_[j].leaf;
      if (l < index_span) {
        basic_first_[l] = static_cast<std::uint8_t>(j);
        ++basic_count_[l];
      } else if (l - leaves::ext_max < index_span) {
        ext_first_[l - leaves::ext_max] = static_cast<std::uint8_t>(j);
        ++ext_count_[l - leaves::ext_max];
      }
    }
  }

  /// The dynamic rules. Always inlined into answer() for the same reason as find().
  [[gnu::always_inline]] constexpr void patch(std::uint32_t leaf, std::uint32_t subleaf, regs& out,
                                              const vcpu_state& v) const noexcept {
    switch (leaf) {
      case leaves::version:
        // rule osxsave_ospke, rule apic_id
        if (features_.test(feat::xsave) && v.cr4.test(x86::cr4::osxsave)) out.ecx |= feat::osxsave.mask();
        out.ebx = (out.ebx & 0x00ffffffu) | ((v.x2apic_id & 0xffu) << 24);
        break;
      case leaves::extended_features:
        if (subleaf == 0 && features_.test(feat::pku) && v.cr4.test(x86::cr4::pke)) out.ecx |= feat::ospke.mask();
        break;
      case leaves::ext_topology:
      case leaves::v2_ext_topology:
        out.edx = v.x2apic_id;  // rule apic_id
        break;
      case leaves::xsave:  // rule xsave_sizes
        if (subleaf == 0) out.ebx = layout_.standard_size(v.xcr0 & xcr0_).value_or(xsave_legacy_and_header_size);
        else if (subleaf == 1)
          out.ebx = layout_.compacted_size((v.xcr0 & xcr0_) | (v.xss & xss_)).value_or(xsave_legacy_and_header_size);
        break;
      default:
        break;
    }
  }

  table_type table_{};
  std::array<std::uint8_t, index_span> basic_first_{};
  std::array<std::uint8_t, index_span> basic_count_{};
  std::array<std::uint8_t, index_span> ext_first_{};
  std::array<std::uint8_t, index_span> ext_count_{};
  feature_set features_{};
  xsave_layout layout_{};
  x86::xfeatures withheld_{};
  std::array<xsave_enumeration, xsave_max_components> xsave_issues_{};
  topology topo_{};
  x86::xfeatures xcr0_{};
  x86::xfeatures xss_{};
  vendor vendor_ = vendor::unknown;
  std::uint32_t kvm_base_ = kvm::default_base;
  std::uint32_t max_basic_ = 0;
  std::uint32_t max_ext_ = 0;
  bool has_ext_ = false;
  bool kvm_leaves_ = false;
};

namespace detail {

/// Features decided by the hypervisor's emulation alone (rule emulated_only).
inline constexpr feature_set emulation_only{feat::x2apic, feat::tsc_deadline, feat::arat};
/// Dynamic bits: never stored set.
inline constexpr feature_set dynamic_bits{feat::osxsave, feat::ospke};

constexpr void apply_dependencies(feature_set& f, x86::xfeatures available) noexcept {
  for (int pass = 0; pass < 8; ++pass) {
    bool changed = false;
    for (const feature_dependency& d : feature_dependencies) {
      if (!f.test(d.f)) continue;
      const bool req_ok = !d.has_requirement || f.test(d.requires_feature);
      const bool comps_ok = (d.components.raw() & ~available.raw()) == 0;
      if (!req_ok || !comps_ok) {
        f.reset(d.f);
        changed = true;
      }
    }
    if (!changed) return;
  }
}

[[nodiscard]] constexpr x86::xfeatures needed_components(const feature_set& f) noexcept {
  x86::xfeatures c{};
  if (!f.test(feat::xsave)) return c;
  c = x86::xfeatures::x87 | x86::xfeatures::sse;
  for (const feature_dependency& d : feature_dependencies)
    if (f.test(d.f)) c = c | d.components;
  for (const component_owner& o : component_owners)
    if (f.test(o.f)) c = c | o.components;
  return c;
}

/// Copies a word of `f` into the table (the leaf must exist).
constexpr void store_word(policy::table_type& t, const feature_set& f, word w, std::uint32_t hv_base) noexcept {
  const word_location l = locate(w, hv_base);
  if (regs* r = t.find(l.leaf, l.subleaf)) r->at(l.r) = f.get(w);
}

}  // namespace detail

/// Builds the guest policy into `p` (in place: a freestanding caller keeps `p` in static
/// storage and the stack small). Steps: (1) guest features = ((host & hv.passthrough) |
/// hv.emulated) & ~cfg.deny; (2) the static rules of `normalization_rules`, in table order;
/// (3) the leaves copied from the host with their feature words replaced. Every failure is
/// a policy_error (and leaves `p` empty); nothing here can overflow.
template <std::size_t N>
constexpr result<void, policy_error> build_policy_into(policy& p, const table<N>& host, const hypervisor_caps& hv,
                                                       const policy_config& cfg) noexcept {
  p = policy{};
  auto fail = [&p](policy_error e) {
    p = policy{};
    return unexpected(e);
  };
  if (!kvm::is_valid_base(cfg.kvm_base)) return fail(policy_error::bad_kvm_base);
  if (!cfg.topo.valid()) return fail(policy_error::bad_topology);
  if (cfg.max_basic_leaf < leaves::version) return fail(policy_error::bad_max_leaf);
  if (host.find(leaves::basic_max) == nullptr || host.find(leaves::version) == nullptr)
    return fail(policy_error::no_basic_leaves);
  p.vendor_ = decode_vendor(host.get(leaves::basic_max));
  p.kvm_base_ = cfg.kvm_base;
  p.kvm_leaves_ = cfg.announce_hypervisor;
  p.topo_ = cfg.topo;
  const bool amd = is_amd_like(p.vendor_);

  // (1) intersection. The host's own paravirtual words (when it is itself a guest) and
  // hints are never passed through.
  feature_set host_f = read_features(host);
  host_f.put(word::kvm_features, 0);
  host_f.put(word::kvm_hints, 0);
  feature_set f = ((host_f & hv.passthrough) | hv.emulated) & ~cfg.deny;
  f.put(word::kvm_hints, 0);
  f = f & ~detail::dynamic_bits;
  // A word can only be offered in a leaf the guest will have: the host has it and it is
  // not above the configured cap (rule max_basic_leaf); without leaf 0xD no XSAVE.
  const std::uint32_t host_max_basic = host.get(leaves::basic_max).eax;
  std::uint32_t cap = cfg.max_basic_leaf < host_max_basic ? cfg.max_basic_leaf : host_max_basic;
  if (cap >= leaves::hypervisor_base) cap = leaves::hypervisor_base - 1;
  for (std::size_t i = 0; i < word_count; ++i) {
    const auto w = static_cast<word>(i);
    const word_location l = locate(w);
    if (l.hypervisor_relative) continue;
    if (host.find(l.leaf, l.subleaf) == nullptr || (leaf_class(l.leaf) == 0 && l.leaf > cap)) f.put(w, 0);
  }
  if (cap < leaves::xsave) f.reset(feat::xsave);

  // rule nested_virtualization
  if (!(cfg.nested_virtualization && hv.nested_virtualization)) {
    f.reset(feat::vmx);
    f.reset(feat::svm);
  }
  // rule emulated_only
  f = (f & ~detail::emulation_only) | (hv.emulated & detail::emulation_only & ~cfg.deny);
  // rule pv_send_ipi (order-independent: nothing below reads the KVM feature word)
  if (cfg.ipi_accelerated) f.reset(kvm::features::pv_send_ipi);
  // rule feature_dependencies
  const regs host_d0 = host.get(leaves::xsave, 0);
  const regs host_d1 = host.get(leaves::xsave, 1);
  // Only components hvkit knows, each in its own register (a corrupt host table cannot put
  // a supervisor component into XCR0 or the reverse).
  const x86::xfeatures host_xcr0 =
      x86::xfeatures{(std::uint64_t{host_d0.edx} << 32) | host_d0.eax} & x86::xfeatures::user_components;
  const x86::xfeatures host_xss =
      x86::xfeatures{(std::uint64_t{host_d1.edx} << 32) | host_d1.ecx} & x86::xfeatures::supervisor_components;
  // A component whose own sub-leaf contradicts the bitmaps (no size, the wrong register,
  // an impossible offset) cannot be laid out or offered: it is withheld, with the reason,
  // and the dependency rule below hides the features that need it. Only the components
  // the host enumerates are judged (SDM Vol. 2A CPUID leaf 0DH, sub-leaves n > 1).
  if (host.has_leaf(leaves::xsave)) {
    for (unsigned i = 2; i < xsave_max_components; ++i) {
      const bool in_xcr0 = ((host_xcr0.raw() >> i) & 1u) != 0, in_xss = ((host_xss.raw() >> i) & 1u) != 0;
      if (!in_xcr0 && !in_xss) continue;
      const xsave_enumeration why = check_enumeration(xsave_component::from(host.get(leaves::xsave, i)), in_xss);
      if (why == xsave_enumeration::consistent) continue;
      p.xsave_issues_[i] = why;
      p.withheld_ = p.withheld_ | x86::xfeatures::bit(i);
    }
  }
  x86::xfeatures available =
      x86::xfeatures{(host_xcr0 | host_xss).raw() & ~p.withheld_.raw()} & hv.xsave_components & cfg.xsave_components;
  // XCR0 bit 0 (x87) must always be 1 and SSE is the other legacy component (SDM Vol. 1
  // 13.3): without both, XSAVE cannot be enabled at all.
  const x86::xfeatures legacy = x86::xfeatures::x87 | x86::xfeatures::sse;
  if (!f.test(feat::xsave) || !host.has_leaf(leaves::xsave) || !available.test(legacy)) {
    f.reset(feat::xsave);
    available = x86::xfeatures{};
  }
  detail::apply_dependencies(f, available);
  const x86::xfeatures comps = detail::needed_components(f) & available;
  p.xcr0_ = comps & host_xcr0;
  p.xss_ = comps & host_xss;
  // rule topoext_hidden
  f.reset(feat::topoext);
  // rule hypervisor_bit
  f.set(feat::hypervisor, cfg.announce_hypervisor);

  // (3) materialize the table from the host's leaves.
  policy::table_type& t = p.table_;
  bool ok = true;
  auto copy = [&](std::uint32_t leaf, std::uint32_t sub, regs r) { ok = ok && static_cast<bool>(t.set(leaf, sub, r)); };
  for (const entry& e : host) {
    const regs& r = e.value;
    switch (e.leaf) {
      case 0x0: copy(0, 0, {0, r.ebx, r.ecx, r.edx}); break;
      case 0x1: copy(1, 0, {r.eax, r.ebx & 0x0000ffffu, 0, 0}); break;  // brand index, CLFLUSH size
      case 0x2: copy(2, 0, r); break;
      case 0x4: copy(4, e.subleaf, r); break;
      case 0x6: copy(6, 0, {}); break;
      case 0x7:
        if (e.subleaf <= 2) copy(7, e.subleaf, {});
        break;
      case 0xd:
        if (e.subleaf <= 1) copy(0xd, e.subleaf, {});
        else if (e.subleaf < xsave_max_components && ((comps.raw() >> e.subleaf) & 1u) != 0) {
          const xsave_component c = xsave_component::from(r);
          p.layout_.components[e.subleaf] = c;
          copy(0xd, e.subleaf, c.to_regs());
        }
        break;
      case 0x14:
        if (f.test(feat::intel_pt)) copy(0x14, e.subleaf, e.subleaf == 0 ? regs{r.eax, 0, r.ecx, r.edx} : r);
        break;
      case 0x19:
        if (f.test(feat::kl)) copy(0x19, 0, {r.eax, 0, r.ecx, 0});
        break;
      case 0x80000000: copy(e.leaf, 0, {0, r.ebx, r.ecx, r.edx}); break;
      case 0x80000001: copy(e.leaf, 0, {r.eax, r.ebx, 0, 0}); break;
      case 0x80000002: case 0x80000003: case 0x80000004: case 0x80000005: case 0x80000006:
        copy(e.leaf, 0, r);
        break;
      case 0x80000007: copy(e.leaf, 0, {}); break;
      case 0x80000008: copy(e.leaf, 0, {r.eax & 0xffffu, 0, 0, 0}); break;  // address widths
      case 0x8000000a:
        if (f.test(feat::svm)) copy(e.leaf, 0, svm_guest_leaf(r, hv.svm));  // APM Vol. 3 Appendix E
        break;
      case 0x8000001f:
        if (f.get(word::ext1f_eax) != 0) copy(e.leaf, 0, {0, r.ebx, r.ecx, r.edx});
        break;
      case 0x80000021: copy(e.leaf, 0, {}); break;
      default: break;  // every other leaf is hidden (reads as zero)
    }
  }
  if (!ok) return fail(policy_error::table_full);
  for (std::size_t i = 0; i < word_count; ++i) {
    const auto w = static_cast<word>(i);
    if (w != word::kvm_features && w != word::kvm_hints) detail::store_word(t, f, w, cfg.kvm_base);
  }
  // Unreachable after the check above (kept as a guard): an exposed component without a size.
  for (unsigned i = 2; i < xsave_max_components; ++i)
    if (((comps.raw() >> i) & 1u) != 0 && p.layout_.components[i].size == 0) return fail(policy_error::xsave_layout);

  // rule xsave_leaf
  if (f.test(feat::xsave)) {
    regs* d0 = t.find(leaves::xsave, 0);
    regs* d1 = t.find(leaves::xsave, 1);
    if (d0 == nullptr || d1 == nullptr) return fail(policy_error::xsave_layout);
    d0->eax = static_cast<std::uint32_t>(p.xcr0_.raw());
    d0->edx = static_cast<std::uint32_t>(p.xcr0_.raw() >> 32);
    auto all_user = p.layout_.standard_size(p.xcr0_);
    // Every size answer() can give is bounded by these two: checking them here means the
    // dynamic rule never meets an error.
    if (!all_user || !p.layout_.compacted_size(p.xcr0_ | p.xss_)) return fail(policy_error::xsave_layout);
    d0->ecx = all_user.value();
    d0->ebx = xsave_legacy_and_header_size;  // XCR0 = x87 at reset (rule xsave_sizes)
    d1->ecx = static_cast<std::uint32_t>(p.xss_.raw());
    d1->edx = static_cast<std::uint32_t>(p.xss_.raw() >> 32);
    d1->ebx = xsave_legacy_and_header_size;  // XCR0 | XSS = x87 at reset
  } else {
    t.erase_leaf(leaves::xsave);
  }

  // rule topology
  const topology& topo = cfg.topo;
  const std::uint32_t smt = topo.smt_shift(), pkg = topo.package_shift();
  const regs lvl0{smt, topo.threads_per_core, (topology_level::smt << 8) | 0u, 0};
  const regs lvl1{pkg, topo.threads_per_package(), (topology_level::core << 8) | 1u, 0};
  t.erase_leaf(leaves::ext_topology);
  copy(leaves::ext_topology, 0, lvl0);
  copy(leaves::ext_topology, 1, lvl1);
  t.erase_leaf(leaves::v2_ext_topology);
  if (host.has_leaf(leaves::v2_ext_topology)) {
    copy(leaves::v2_ext_topology, 0, lvl0);
    copy(leaves::v2_ext_topology, 1, lvl1);
  }
  if (!ok) return fail(policy_error::table_full);
  if (regs* l1 = t.find(leaves::version)) {
    const std::uint32_t ids = pkg >= 8 ? 0xffu : (1u << pkg);  // 8-bit field
    l1->ebx = (l1->ebx & ~0x00ff0000u) | (ids << 16);
    l1->edx = topo.threads_per_package() > 1 ? (l1->edx | feat::htt.mask()) : (l1->edx & ~feat::htt.mask());
    f.set(feat::htt, topo.threads_per_package() > 1);
  }
  for (std::uint32_t s = 0;; ++s) {
    regs* c = t.find(leaves::cache_params, s);
    if (c == nullptr || (c->eax & 0x1fu) == 0) break;
    const std::uint32_t level = (c->eax >> 5) & 0x7u;
    const std::uint32_t sharing = level >= 3 ? pkg : smt;  // L1/L2 per core, L3 per package
    const std::uint32_t share_ids = ((1u << sharing) - 1u) & 0xfffu;
    const std::uint32_t core_ids = ((1u << (pkg - smt)) - 1u) & 0x3fu;
    c->eax = (c->eax & 0x3fffu) | (share_ids << 14) | (core_ids << 26);
  }
  if (amd) {
    if (regs* e8 = t.find(leaves::ext_address_sizes)) {
      const std::uint32_t nc = (topo.threads_per_package() - 1u) & 0xffu;
      e8->ecx = nc | ((pkg & 0xfu) << 12);
    }
  }

  // rule hypervisor_leaves
  t.erase_range(leaves::hypervisor_base, leaves::hypervisor_last);
  if (cfg.announce_hypervisor) {
    copy(cfg.kvm_base, 0, {cfg.kvm_base + 1, kvm::signature_ebx, kvm::signature_ecx, kvm::signature_edx});
    copy(cfg.kvm_base + 1, 0, {f.get(word::kvm_features), 0, 0, cfg.hints.get(word::kvm_hints)});
  } else {
    f.put(word::kvm_features, 0);
  }
  if (!ok) return fail(policy_error::table_full);

  // rule leaf7_max_subleaf
  if (regs* l7 = t.find(leaves::extended_features, 0)) l7->eax = t.highest_subleaf(leaves::extended_features);

  // rule max_basic_leaf
  t.erase_range(cap + 1, leaves::hypervisor_base - 1);
  p.max_basic_ = t.highest_leaf(0, leaves::hypervisor_base - 1, 0);
  if (regs* l0 = t.find(leaves::basic_max)) l0->eax = p.max_basic_;
  // rule max_extended_leaf
  p.has_ext_ = t.has_leaf(leaves::ext_max);
  p.max_ext_ = t.highest_leaf(leaves::ext_max, 0xbfffffffu, leaves::ext_max);
  if (regs* e0 = t.find(leaves::ext_max)) e0->eax = p.max_ext_;

  // The stored features are what the table says (leaves above the cap are gone).
  p.features_ = read_features(t, cfg.kvm_base);
  p.features_.put(word::kvm_hints, 0);
  p.reindex();
  return {};
}

/// build_policy_into() returning the policy by value (about 4.5 KB).
template <std::size_t N>
[[nodiscard]] constexpr result<policy, policy_error> build_policy(const table<N>& host, const hypervisor_caps& hv,
                                                                  const policy_config& cfg) noexcept {
  policy p;
  if (auto r = build_policy_into(p, host, hv, cfg); !r) return unexpected(r.error());
  return p;
}

}  // namespace hvkit::cpuid
