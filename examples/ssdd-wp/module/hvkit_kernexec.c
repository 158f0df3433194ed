// SPDX-License-Identifier: MIT
/*
 * hvkit_kernexec: a model of grsecurity's KERNEXEC write window on a hot kernel path, for
 * the CR0.WP workload (ssdd, rt-tests). KERNEXEC made kernel read-only data writable for a
 * moment by clearing CR0.WP ("open kernel"), wrote, and set CR0.WP again ("close kernel");
 * a guest kernel built that way toggles CR0.WP twice per such write, and whether those MOVs
 * to CR0 exit to the hypervisor is what the CR0.WP guest-owned work changed.
 *
 * A kprobe on `sym` (default arch_ptrace: every ptrace(2) request of the tracer, i.e. one
 * hit per ssdd iteration, the PTRACE_SINGLESTEP) runs, with interrupts off, `pairs` times:
 * CR0.WP := 0 (raw MOV to CR0: Linux pins WP in native_write_cr0), one write to a variable
 * in the module's __ro_after_init data (read-only once the module is live: it is the write
 * WP=0 permits), CR0.WP := 1.
 * Counters (read them from /sys/module/hvkit_kernexec/parameters/): hits, cr0_writes,
 * ro_writes (the read-only variable's value: equals hits * pairs when every window really
 * opened).
 * hvkit=1|2: under the hvkit reference hypervisor's Linux guest, WP guest-owned (1) or
 * intercepted (2) through its hypercalls (0x68760001 at load, 0x68760002 at unload, which
 * returns the CR-access exits in between into `hvkit_cr_exits`); 0 (default) issues no
 * VMCALL, for any other hypervisor.
 * GPL-compatible licence for the kernel's GPL-only kprobe symbols; a test fixture loaded
 * into a guest, not part of the hvkit library.
 */
#include <linux/irqflags.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <asm/cpufeature.h>

#define CR0_WP (1UL << 16)
#define HC_WP_BEGIN 0x68760001UL
#define HC_WP_END 0x68760002UL

static char *sym = "arch_ptrace";
module_param(sym, charp, 0444);
static unsigned int pairs = 1;
module_param(pairs, uint, 0444);
static int hvkit;
module_param(hvkit, int, 0444);
static unsigned long hits, cr0_writes, ro_writes, hvkit_cr_exits;
module_param(hits, ulong, 0444);
module_param(cr0_writes, ulong, 0444);
module_param(ro_writes, ulong, 0444);
module_param(hvkit_cr_exits, ulong, 0444);

/* Read-only after the module's init: only an open window (WP=0) lets the kernel write it. */
static unsigned long ro_counter __ro_after_init;

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

/*
 * RDX = 0: the module has no timed loop of its own (hvkit_wp passes its toggle loop's TSC
 * there); the ssdd run is timed by the guest's /init, and the hypervisor then logs no TSC.
 */
static unsigned long hypercall(unsigned long nr, unsigned long a, unsigned long b)
{
	unsigned long ret;

	/* VMCALL on Intel, VMMCALL on AMD (Linux sets X86_FEATURE_VMMCALL there). */
	if (boot_cpu_has(X86_FEATURE_VMMCALL))
		asm volatile("vmmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(0UL) : "memory");
	else
		asm volatile("vmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(0UL) : "memory");
	return ret;
}

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long flags, cr0;
	unsigned int i;

	local_irq_save(flags);
	cr0 = raw_read_cr0();
	for (i = 0; i < pairs; i++) {
		raw_write_cr0(cr0 & ~CR0_WP);  /* open kernel */
		WRITE_ONCE(ro_counter, ro_counter + 1);
		raw_write_cr0(cr0 | CR0_WP);   /* close kernel */
	}
	local_irq_restore(flags);
	hits++;
	cr0_writes += 2UL * pairs;
	ro_writes = READ_ONCE(ro_counter);
	return 0;
}

static struct kprobe kp = { .pre_handler = pre };

static int __init kernexec_init(void)
{
	int err;

	kp.symbol_name = sym;
	if (hvkit)
		hypercall(HC_WP_BEGIN, hvkit == 2, 0);
	err = register_kprobe(&kp);
	if (err) {
		pr_err("hvkit_kernexec: kprobe on %s: %d\n", sym, err);
		return err;
	}
	pr_info("hvkit_kernexec: kprobe on %s at %px, %u WP window(s) per hit\n", sym, kp.addr, pairs);
	return 0;
}

static void __exit kernexec_exit(void)
{
	unregister_kprobe(&kp);
	if (hvkit)
		hvkit_cr_exits = hypercall(HC_WP_END, cr0_writes, 0);
	pr_info("hvkit_kernexec: %lu hits, %lu CR0 writes, read-only counter %lu, hvkit CR exits %lu\n", hits,
		cr0_writes, ro_counter, hvkit_cr_exits);
}

module_init(kernexec_init);
module_exit(kernexec_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("hvkit: KERNEXEC-style CR0.WP write windows on a kprobed kernel path");
