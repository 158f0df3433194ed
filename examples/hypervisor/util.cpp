// hvkit reference hypervisor: reporting, register access and event injection helpers.
#include "hv.hpp"

namespace hv {

bool str_eq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
void result(const char* name, bool pass, const char* fmt, ...) {
  (pass ? results_pass : results_fail)++;
  kprintf("HVKIT RESULT %s %s", name, pass ? "PASS" : "FAIL");
  if (fmt) {
    console_putc(' ');
    va_list ap;
    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
  }
  console_putc('\n');
}

milli ratio(std::uint64_t num, std::uint64_t den) {
  if (den == 0) return {0, 0};
  std::uint64_t m = num * 1000 / den;
  return {m / 1000, m % 1000};
}

std::uint64_t& gpr(guest_regs& r, unsigned index) {
  std::uint64_t* table[16] = {&r.rax, &r.rcx, &r.rdx, &r.rbx, nullptr, &r.rbp, &r.rsi, &r.rdi,
                              &r.r8,  &r.r9,  &r.r10, &r.r11, &r.r12, &r.r13, &r.r14, &r.r15};
  return *table[index & 15];
}
std::uint64_t read_gpr(guest_regs& r, unsigned index) {
  return (index & 15) == 4 ? vmread(fields::guest_rsp) : gpr(r, index);
}
void write_gpr(guest_regs& r, unsigned index, std::uint64_t v) {
  if ((index & 15) == 4) vmwrite(fields::guest_rsp, v);
  else gpr(r, index) = v;
}

void skip_instruction() {
  vmwrite(fields::guest_rip, vmread(fields::guest_rip) + vmread(fields::vm_exit_instruction_length));
}

void inject_exception(unsigned vector, bool has_error_code, std::uint32_t error_code) {
  std::uint32_t info = vector | intr_type_hw_exception | intr_info_valid;
  if (has_error_code) {
    info |= intr_info_deliver_error_code;
    vmwrite(fields::vm_entry_exception_error_code, error_code);
  }
  vmwrite(fields::vm_entry_interruption_info, info);
}
void inject_gp(std::uint32_t error_code) { inject_exception(13, true, error_code); }

/// #PF into the guest: VM entry does not load CR2, so the hypervisor sets the real CR2,
/// which the guest then sees (SDM Vol. 3C 27.3 lists the registers VM exits and entries
/// load; CR2 is not one of them).
void inject_pf(std::uint64_t la, x86::pfec error) {
  asm volatile("mov %0, %%cr2" ::"r"(la) : "memory");
  inject_exception(14, true, static_cast<std::uint32_t>(error.hardware_bits().raw()));
}

/// Reads a NUL-terminated guest string at a guest-physical address into buf. The guest
/// runs identity-paged and EPT is an identity map, so the GPA is also the HPA; it is only
/// trusted after the bounds check against guest memory.
bool read_guest_string(std::uint64_t gpa, char* buf, std::size_t size) {
  for (std::size_t i = 0; i + 1 < size; ++i) {
    std::uint64_t a = gpa + i;
    if (a < layout::guest_mem_base || a >= layout::guest_mem_base + layout::guest_mem_size) {
      buf[i] = '\0';
      return false;
    }
    char c = *reinterpret_cast<const volatile char*>(a);
    buf[i] = c;
    if (c == '\0') return true;
    if (c < ' ' || c > '~') buf[i] = '?';
  }
  buf[size - 1] = '\0';
  return true;
}

}  // namespace hv
