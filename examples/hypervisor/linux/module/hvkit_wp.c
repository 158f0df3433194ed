// SPDX-License-Identifier: MIT
/*
 * hvkit_wp: toggles CR0.WP in a real Linux kernel with raw MOV to CR0 (Linux pins WP in
 * native_write_cr0, so the module bypasses it), once with CR0.WP guest-owned and once with
 * it intercepted (the hvkit hypervisor flips the CR0 guest/host mask on hypercall), and
 * reads the CR-access exit count the hypervisor measured for each run.
 * Results: /sys/module/hvkit_wp/parameters/{owned,intercepted}_{toggles,exits,mismatches}.
 * It also executes VMXON (VMX is not offered: #UD expected) and XSETBV with an invalid XCR0
 * (#GP expected), both behind exception-table entries, and records whether they faulted.
 * GPL-2.0 because the kernel refuses to export its symbols to anything else; it is a test
 * fixture loaded into the guest only, not part of the hvkit library.
 */
#include <linux/irqflags.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/smp.h>
#include <linux/cpumask.h>
#include <asm/asm.h>
#include <asm/msr.h>
#include <asm/cpufeature.h>
#include <asm/apic.h>
#include <asm/irq_vectors.h>

#define HC_WP_BEGIN 0x68760001UL
#define HC_WP_END 0x68760002UL
#define CR0_WP (1UL << 16)

static unsigned long owned_toggles, owned_exits, owned_mismatches;
static unsigned long intercepted_toggles, intercepted_exits, intercepted_mismatches;
module_param(owned_toggles, ulong, 0444);
module_param(owned_exits, ulong, 0444);
module_param(owned_mismatches, ulong, 0444);
module_param(intercepted_toggles, ulong, 0444);
module_param(intercepted_exits, ulong, 0444);
module_param(intercepted_mismatches, ulong, 0444);
/* Guest TSC over each run's toggle loop (reads back included), and 1 when the hypervisor
 * cannot make CR0.WP guest-owned (shadow paging encodes WP in its tables: every toggle exits). */
static unsigned long owned_tsc, intercepted_tsc, wp_always_intercepted;
module_param(owned_tsc, ulong, 0444);
module_param(intercepted_tsc, ulong, 0444);
module_param(wp_always_intercepted, ulong, 0444);
/* 1 when the instruction faulted (and the exception table let the module go on). */
static unsigned long vmxon_faulted, xsetbv_invalid_faulted;
module_param(vmxon_faulted, ulong, 0444);
module_param(xsetbv_invalid_faulted, ulong, 0444);
/* triple_fault=1: the hostile guest kernel; an empty IDT, then INT3: #GP, #DF, shutdown. */
static int triple_fault;
module_param(triple_fault, int, 0444);
/* IPI cost: guest TSC per smp_call_function_single() to the first other CPU and per
 * smp_call_function() to all others, each waiting for the handler (ipi_calls of each). */
static unsigned long ipi_calls = 1000, ipi_tsc_one, ipi_tsc_all;
module_param(ipi_calls, ulong, 0444);
module_param(ipi_tsc_one, ulong, 0444);
module_param(ipi_tsc_all, ulong, 0444);
/* The sender's side alone: guest TSC per call of the APIC driver's send functions, the
 * ones Linux's IPIs end in (no waiting for the handler): send_IPI (one CPU), send_IPI_mask
 * with that one CPU, send_IPI_mask_allbutself (every online CPU but this one) and
 * send_IPI_allbutself (the all-but-self shorthand). With KVM_FEATURE_PV_SEND_IPI Linux's KVM
 * guest code replaces the two mask functions by KVM_HC_SEND_IPI (arch/x86/kernel/kvm.c,
 * "setup PV IPIs"); the other two stay ICR writes. The vector is a function-call IPI with an
 * empty queue: its handler finds nothing to do. */
static unsigned long ipi_tsc_send_one, ipi_tsc_send_mask, ipi_tsc_send_mask_allbutself, ipi_tsc_send_allbutself;
module_param(ipi_tsc_send_one, ulong, 0444);
module_param(ipi_tsc_send_mask, ulong, 0444);
module_param(ipi_tsc_send_mask_allbutself, ulong, 0444);
module_param(ipi_tsc_send_allbutself, ulong, 0444);
static unsigned int toggles = 10000;
module_param(toggles, uint, 0444);

static unsigned long hypercall(unsigned long nr, unsigned long a, unsigned long b, unsigned long c)
{
	unsigned long ret;

	/* VMCALL on Intel, VMMCALL on AMD (Linux sets X86_FEATURE_VMMCALL there). */
	if (boot_cpu_has(X86_FEATURE_VMMCALL))
		asm volatile("vmmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	else
		asm volatile("vmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return ret;
}

static inline unsigned long raw_read_cr0(void)
{
	unsigned long v;

	asm volatile("mov %%cr0, %0" : "=r"(v));
	return v;
}

static inline void raw_write_cr0(unsigned long v)
{
	asm volatile("mov %0, %%cr0" : : "r"(v) : "memory");
}

/* One run: `toggles` MOVs to CR0, each flipping WP; every write is read back. */
static void run(int intercept, unsigned long *done, unsigned long *exits, unsigned long *mismatches,
		unsigned long *tsc)
{
	unsigned long flags, cr0, want, bad = 0;
	unsigned int i;
	u64 t0, t1;

	local_irq_save(flags);
	cr0 = raw_read_cr0();
	/* Returns 1 when WP stays intercepted whatever the module asks (shadow paging). */
	wp_always_intercepted = hypercall(HC_WP_BEGIN, intercept, 0, 0) == 1;
	t0 = rdtsc_ordered();
	for (i = 0; i < toggles; i++) {
		want = (i & 1) ? (cr0 | CR0_WP) : (cr0 & ~CR0_WP);
		raw_write_cr0(want);
		if (raw_read_cr0() != want)
			bad++;
	}
	t1 = rdtsc_ordered();
	/* WP as it was: toggles is even, so CR0 is unchanged and not written (a write that
	 * changes nothing still exits where every CR0 write is intercepted: SVM shadow paging). */
	if (raw_read_cr0() != cr0)
		raw_write_cr0(cr0);
	*exits = hypercall(HC_WP_END, toggles, bad, t1 - t0);
	local_irq_restore(flags);
	*done = toggles;
	*mismatches = bad;
	*tsc = t1 - t0;
}

/* VMXON in the guest: VMX is not offered, the hypervisor answers #UD (on AMD the CPU does). */
static int try_vmxon(void)
{
	static u64 region __aligned(4096);
	u64 pa = __pa(&region);

	asm goto("1: vmxon %[pa]\n\t" _ASM_EXTABLE(1b, %l[fault]) : : [pa] "m"(pa) : "cc", "memory" : fault);
	return 0;
fault:
	return 1;
}

/* XSETBV with an invalid XCR0 (AVX without SSE, SDM Vol. 1 13.3): #GP(0). */
static int try_xsetbv_invalid(void)
{
	asm goto("1: xsetbv\n\t" _ASM_EXTABLE(1b, %l[fault]) : : "a"(0x5), "d"(0), "c"(0) : "memory" : fault);
	return 0;
fault:
	return 1;
}

static void ipi_nop(void *unused)
{
}

static void measure_ipis(void)
{
	int self = get_cpu(), target = -1, cpu;
	unsigned long i;
	u64 t0;

	for_each_online_cpu(cpu)
		if (cpu != self && target < 0)
			target = cpu;
	if (target >= 0 && ipi_calls > 0) {
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			smp_call_function_single(target, ipi_nop, NULL, 1);
		ipi_tsc_one = (rdtsc_ordered() - t0) / ipi_calls;
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			smp_call_function(ipi_nop, NULL, 1);
		ipi_tsc_all = (rdtsc_ordered() - t0) / ipi_calls;
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			apic->send_IPI(target, CALL_FUNCTION_SINGLE_VECTOR);
		ipi_tsc_send_one = (rdtsc_ordered() - t0) / ipi_calls;
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			apic->send_IPI_mask(cpumask_of(target), CALL_FUNCTION_SINGLE_VECTOR);
		ipi_tsc_send_mask = (rdtsc_ordered() - t0) / ipi_calls;
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			apic->send_IPI_mask_allbutself(cpu_online_mask, CALL_FUNCTION_VECTOR);
		ipi_tsc_send_mask_allbutself = (rdtsc_ordered() - t0) / ipi_calls;
		t0 = rdtsc_ordered();
		for (i = 0; i < ipi_calls; i++)
			apic->send_IPI_allbutself(CALL_FUNCTION_VECTOR);
		ipi_tsc_send_allbutself = (rdtsc_ordered() - t0) / ipi_calls;
	}
	put_cpu();
}

static void run_both(void *unused)
{
	run(0, &owned_toggles, &owned_exits, &owned_mismatches, &owned_tsc);
	run(1, &intercepted_toggles, &intercepted_exits, &intercepted_mismatches, &intercepted_tsc);
}

static int __init hvkit_wp_init(void)
{
	int cpu;

	if (triple_fault) {
		struct {
			u16 limit;
			u64 base;
		} __packed empty = {0, 0};

		pr_warn("hvkit_wp: triple fault on purpose\n");
		local_irq_disable();
		asm volatile("lidt %0\n\tint3" : : "m"(empty) : "memory");
	}
	/* Both runs on every online CPU (each vCPU counts its own CR exits); the parameters
	 * keep the last CPU's numbers, the hypervisor reports every vCPU's. */
	for_each_online_cpu(cpu)
		smp_call_function_single(cpu, run_both, NULL, 1);
	measure_ipis();
	vmxon_faulted = try_vmxon();
	xsetbv_invalid_faulted = try_xsetbv_invalid();
	pr_info("hvkit_wp: guest-owned %lu toggles %lu CR exits; intercepted %lu toggles %lu CR exits\n",
		owned_toggles, owned_exits, intercepted_toggles, intercepted_exits);
	return 0;
}

static void __exit hvkit_wp_exit(void)
{
}

module_init(hvkit_wp_init);
module_exit(hvkit_wp_exit);
MODULE_LICENSE("Dual MIT/GPL");  /* MIT, and GPL-compatible for the kernel's GPL-only symbols */
MODULE_DESCRIPTION("hvkit: CR0.WP toggles under the hvkit reference hypervisor");
