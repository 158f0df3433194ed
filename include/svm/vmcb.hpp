// SPDX-License-Identifier: MIT
/// @file
/// @brief The VMCB as memory: `vmcb_page` (a 4 KiB, 4 KiB-aligned page), `vmcb_view` (typed
/// access to a VMCB page the hypervisor owns, e.g. the one whose physical address it passes
/// to VMRUN), `soft_vmcb` (an owning VMCB that counts accesses, for tests and simulators),
/// and the typed front end svm::read(m, fields::x) / svm::write(m, fields::x, v).
///
/// The VMCB is ordinary memory the processor reads on VMRUN and writes on #VMEXIT
/// (APM Vol. 2, 15.5 "VMRUN Instruction", 15.6 "#VMEXIT"). Every access here is a
/// little-endian byte copy at the field's offset: no reinterpret_cast, no type punning, valid
/// in constant evaluation (a byte loop there; at run time on a little-endian host one
/// __builtin_memcpy of the field's width, i.e. one load or store).
/// What does not compile: writing a field the processor writes on #VMEXIT (exit code and
/// information, nRIP; processor_write() is the processor's side, for tests and for a nested
/// hypervisor emulating #VMEXIT into its guest's VMCB), a run-time value of another width,
/// another register type (x86::cr4 into CR0), an integer constant that does not fit.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "vmcb_field.hpp"
#include "vmcb_fields.hpp"
#include "../x86/contract.hpp"
#include "../x86/result.hpp"

namespace hvkit::svm {

/// A VMCB-holding page: 4 KiB, 4 KiB aligned (APM 15.5.1: the VMCB physical address must be
/// page aligned).
struct alignas(vmcb_size) vmcb_page {
  std::array<std::uint8_t, vmcb_size> bytes{};
};
static_assert(sizeof(vmcb_page) == vmcb_size && alignof(vmcb_page) == vmcb_size);

/// Raw little-endian access by offset and width; what the typed front end runs on.
template <class M>
concept vmcb_memory = requires(M& m, const M& cm, std::uint16_t offset, unsigned bytes, std::uint64_t v) {
  { cm.load(offset, bytes) } -> std::same_as<std::uint64_t>;
  { m.store(offset, bytes, v) } -> std::same_as<void>;
};

namespace detail {
// Outside constant evaluation on a little-endian host, one load or store of the field's width
// (a copy of its bytes: no type punning). GCC at -O2 keeps the byte loops below as loops when
// the width is not a constant it unrolls (measured in the reference hypervisor's SVM exit
// path: about twice the emulated cycles per CR0 write exit).
template <class T>
[[nodiscard]] inline T load_bytes(const std::uint8_t* p) noexcept {
  T v;
  __builtin_memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
inline void store_bytes(std::uint8_t* p, T v) noexcept {
  __builtin_memcpy(p, &v, sizeof(T));
}
[[nodiscard]] constexpr std::uint64_t load_le(const std::uint8_t* p, unsigned bytes) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (!std::is_constant_evaluated()) {
      switch (bytes) {
        case 1: return p[0];
        case 2: return load_bytes<std::uint16_t>(p);
        case 4: return load_bytes<std::uint32_t>(p);
        case 8: return load_bytes<std::uint64_t>(p);
        default: break;
      }
    }
  }
  std::uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
constexpr void store_le(std::uint8_t* p, unsigned bytes, std::uint64_t v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (!std::is_constant_evaluated()) {
      switch (bytes) {
        case 1: p[0] = static_cast<std::uint8_t>(v); return;
        case 2: store_bytes(p, static_cast<std::uint16_t>(v)); return;
        case 4: store_bytes(p, static_cast<std::uint32_t>(v)); return;
        case 8: store_bytes(p, v); return;
        default: break;
      }
    }
  }
  for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
[[nodiscard]] constexpr bool access_in_page(std::uint16_t offset, unsigned bytes) noexcept {
  return (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) && offset + bytes <= vmcb_size;
}
}  // namespace detail

/// Typed access to a VMCB page owned elsewhere (not owning, trivially copyable).
class vmcb_view {
 public:
  constexpr explicit vmcb_view(vmcb_page& page) noexcept : p_(page.bytes.data()) {}
  /// A VMCB page known only by its address (the hypervisor's mapping of the page whose
  /// physical address goes to VMRUN). Accessing an object's bytes through unsigned char is
  /// defined behaviour; `page` must point at 4096 bytes.
  explicit vmcb_view(void* page) noexcept : p_(static_cast<std::uint8_t*>(page)) { HVKIT_EXPECTS(page != nullptr); }

  [[nodiscard]] constexpr std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    HVKIT_EXPECTS(detail::access_in_page(offset, bytes));
    return detail::load_le(p_ + offset, bytes);
  }
  constexpr void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept {
    HVKIT_EXPECTS(detail::access_in_page(offset, bytes));
    detail::store_le(p_ + offset, bytes, v);
  }
  /// The page's bytes (for VMRUN's address, copies, dumps).
  [[nodiscard]] constexpr std::uint8_t* data() const noexcept { return p_; }

 private:
  std::uint8_t* p_;
};

/// A VMCB in ordinary memory that counts stores (tests, simulators, a nested hypervisor's VMCB
/// of its guest). Starts all zero, as a freshly cleared VMCB.
class soft_vmcb {
 public:
  constexpr soft_vmcb() noexcept = default;
  [[nodiscard]] constexpr std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    HVKIT_EXPECTS(detail::access_in_page(offset, bytes));
    return detail::load_le(page_.bytes.data() + offset, bytes);
  }
  constexpr void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept {
    HVKIT_EXPECTS(detail::access_in_page(offset, bytes));
    ++stores_;
    detail::store_le(page_.bytes.data() + offset, bytes, v);
  }
  [[nodiscard]] constexpr vmcb_page& page() noexcept { return page_; }
  [[nodiscard]] constexpr const vmcb_page& page() const noexcept { return page_; }
  [[nodiscard]] constexpr vmcb_view view() noexcept { return vmcb_view{page_}; }
  [[nodiscard]] constexpr std::uint64_t stores() const noexcept { return stores_; }
  constexpr void reset_counts() noexcept { stores_ = 0; }

 private:
  vmcb_page page_{};
  std::uint64_t stores_ = 0;
};

static_assert(vmcb_memory<vmcb_view> && vmcb_memory<soft_vmcb>);

/// A run-time value that does not fit a VMCB field: the typed error of svm::narrow().
struct field_overflow {
  std::uint16_t offset = 0;  ///< the field's offset in the VMCB
  unsigned bits = 0;         ///< the field's width
  std::uint64_t value = 0;   ///< the value (a negative one sign-extended to 64 bits)
  friend constexpr bool operator==(const field_overflow&, const field_overflow&) noexcept = default;
};

/// Checked narrowing of a run-time integer to the field's value type: the value if it fits
/// (a negative value never fits), field_overflow otherwise.
template <vmcb_field F, std::integral T>
  requires(!std::same_as<T, bool>)
[[nodiscard]] constexpr result<typename F::value_type, field_overflow> narrow(F, T v) noexcept {
  using raw_type = typename F::value_type;
  if constexpr (std::is_signed_v<T>) {
    if (v < 0) return unexpected(field_overflow{F::offset, F::bits, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))});
  }
  const auto u = static_cast<std::uint64_t>(v);
  if (u > std::numeric_limits<raw_type>::max()) return unexpected(field_overflow{F::offset, F::bits, u});
  return static_cast<raw_type>(u);
}

/// Explicit truncation to the field's width (its low bytes). For when that is meant.
template <vmcb_field F, std::integral T>
  requires(!std::same_as<T, bool>)
[[nodiscard]] constexpr typename F::value_type truncate(F, T v) noexcept {
  return static_cast<typename F::value_type>(v);
}

namespace detail {
/// A field's name as a template argument, so that a compile error can print it.
struct field_name {
  char text[64]{};
};
/// The name of the field at `offset` with `bytes` bytes, from the field table (empty if none).
[[nodiscard]] consteval field_name name_of_field(std::uint16_t offset, unsigned bytes) noexcept {
  field_name n{};
  for (const field_info& f : field_table) {
    if (f.offset != offset || f.bytes != bytes) continue;
    for (std::size_t k = 0; f.name[k] != '\0' && k + 1 < sizeof n.text; ++k) n.text[k] = f.name[k];
    break;
  }
  return n;
}
// Called only when an integer constant does not fit the field (not constexpr: the consteval
// conversion below fails to compile and names the reason, the field and its width in bits).
template <field_name Field, unsigned Bits>
void integer_constant_does_not_fit_the_vmcb_field_width() noexcept {}
// Called only for a run-time integer whose type is not the field's value type.
template <field_name Field, unsigned Bits>
void run_time_integer_is_not_the_vmcb_field_type__narrow_it_with_svm_narrow_or_svm_truncate() noexcept {}
template <class>
inline constexpr bool always_false = false;
}  // namespace detail

/// A value a VMCB field may hold (the parameter type of write()): the field's own unsigned
/// value type, the register type it holds, or an integer constant that fits (checked at
/// compile time). Anything else does not compile; nothing is truncated silently.
template <vmcb_field F>
class field_value {
  using raw_type = typename F::value_type;
  using typed = typename F::typed_type;

 public:
  template <class T>
    requires std::same_as<T, raw_type>
  constexpr field_value(T v) noexcept : raw_(v) {}  // NOLINT(google-explicit-constructor)

  template <class T>
    requires(!std::is_void_v<typed> && std::same_as<T, typed>)
  constexpr field_value(T v) noexcept : raw_(static_cast<raw_type>(v.raw())) {}  // NOLINT(google-explicit-constructor)

  /// An integer constant that fits. A run-time integer of another type does not compile, with
  /// a message naming the field, its width and svm::narrow / svm::truncate (taken by
  /// reference, so that __builtin_constant_p can tell it from a constant before reading it).
  template <std::integral T>
    requires(!std::same_as<T, raw_type> && !std::same_as<T, bool>)
  consteval field_value(const T& constant) noexcept  // NOLINT(google-explicit-constructor)
      : raw_(0) {
    if (!__builtin_constant_p(constant))
      detail::run_time_integer_is_not_the_vmcb_field_type__narrow_it_with_svm_narrow_or_svm_truncate<
          detail::name_of_field(F::offset, F::bytes), F::bits>();
    bool fits = true;
    if constexpr (std::is_signed_v<T>) fits = constant >= 0;
    if (fits) fits = static_cast<std::make_unsigned_t<T>>(constant) <= std::numeric_limits<raw_type>::max();
    if (!fits) detail::integer_constant_does_not_fit_the_vmcb_field_width<detail::name_of_field(F::offset, F::bytes), F::bits>();
    raw_ = static_cast<raw_type>(constant);
  }

  template <class T>
    requires(!std::same_as<T, raw_type> && !std::same_as<T, typed> && !std::integral<T>) || std::same_as<T, bool>
  constexpr field_value(T) noexcept : raw_(0) {  // NOLINT(google-explicit-constructor)
    static_assert(detail::always_false<T>,
                  "VMCB field value type mismatch: write the field's value_type, its typed_type "
                  "(x86::cr0, x86::efer, x86::selector, ...) or an integer constant that fits (APM Appendix B)");
  }

  [[nodiscard]] constexpr raw_type raw() const noexcept { return raw_; }

 private:
  raw_type raw_;
};

/// The field's value, in its own unsigned type.
template <vmcb_memory M, vmcb_field F>
[[nodiscard]] constexpr typename F::value_type read(const M& m, F) noexcept {
  return static_cast<typename F::value_type>(m.load(F::offset, F::bytes));
}

/// The field's value as the register type it holds (read(m, fields::cr0) as x86::cr0).
template <vmcb_memory M, vmcb_field F>
  requires(!std::is_void_v<typename F::typed_type>)
[[nodiscard]] constexpr typename F::typed_type read_typed(const M& m, F f) noexcept {
  using T = typename F::typed_type;
  if constexpr (std::is_aggregate_v<T>)
    return T{read(m, f)};
  else
    return T{static_cast<std::uint64_t>(read(m, f))};
}

/// Write a field the hypervisor owns. A field the processor writes on #VMEXIT does not compile.
template <vmcb_memory M, vmcb_field F>
constexpr void write(M& m, F, std::type_identity_t<field_value<F>> v) noexcept {
  static_assert(!F::read_only,
                "write to a read-only VMCB field (the processor writes it on #VMEXIT: APM 15.6, Table B-1)");
  m.store(F::offset, F::bytes, static_cast<std::uint64_t>(v.raw()));
}

/// The processor's side: write any field, exit information included, as #VMEXIT does (tests;
/// a nested hypervisor emulating #VMEXIT into its guest's VMCB, APM 15.6).
template <vmcb_memory M, vmcb_field F>
constexpr void processor_write(M& m, F, std::type_identity_t<field_value<F>> v) noexcept {
  m.store(F::offset, F::bytes, static_cast<std::uint64_t>(v.raw()));
}

/// Set or clear `mask` in a read-write field (intercept words, control bits).
template <vmcb_memory M, vmcb_field F>
constexpr void set_bits(M& m, F f, typename F::value_type mask, bool on = true) noexcept {
  static_assert(!F::read_only, "write to a read-only VMCB field (APM 15.6, Table B-1)");
  const auto v = read(m, f);
  m.store(F::offset, F::bytes, static_cast<std::uint64_t>(on ? (v | mask) : (v & ~mask)));
}

/// The number of guest instruction bytes the processor fetched (0-15) and the bytes, as
/// saved on #VMEXIT for #NPF and intercepted #PF with decode assists (APM 15.33.3
/// "Instruction Bytes"; Table B-1 offsets 0D0h and 0D1h-0DFh). Without decode assists the
/// count reads 0.
struct instruction_bytes {
  std::uint8_t count = 0;
  std::array<std::uint8_t, 15> bytes{};
};
template <vmcb_memory M>
[[nodiscard]] constexpr instruction_bytes guest_instruction_bytes(const M& m) noexcept {
  instruction_bytes r{};
  const auto n = read(m, fields::guest_instruction_bytes_fetched);
  r.count = n > 15 ? 15 : n;
  for (unsigned i = 0; i < r.count; ++i)
    r.bytes[i] = static_cast<std::uint8_t>(m.load(static_cast<std::uint16_t>(0x0d1 + i), 1));
  return r;
}

}  // namespace hvkit::svm
