// SPDX-License-Identifier: MIT
/* hvtest: the in-guest side of the hvkit Linux check (static, built with the host's gcc,
 * run by the initramfs /init as root).
 *
 *   hvtest e9 TEXT...   write "TEXT\n" to port 0xE9 (the hypervisor's channel: it prints
 *                       the guest's lines as "HVKIT GUEST <line>")
 *   hvtest checks       run the checks below; every result line goes to stdout (the
 *                       guest's console) and to port 0xE9
 *   hvtest shutdown     write "Shutdown" to port 0x8900 (intercepted: the run ends)
 *
 * Result lines: "HVKIT-GUEST CPUID <leaf> <subleaf> <eax> <ebx> <ecx> <edx>" (raw CPUID as
 * the guest sees it; the runner compares them with the policy the hypervisor printed),
 * "HVKIT-GUEST FLAGS <flags of /proc/cpuinfo>", and
 * "HVKIT-GUEST RESULT <check> PASS|FAIL <details>".
 */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

static int e9_ok;

void emit(const char *fmt, ...);
void result(const char *check, int pass, const char *fmt, ...);
void smp_checks(void);
void smp_pin_cpu0(void);

static void e9_write(const char *s)
{
	if (!e9_ok)
		return;
	for (; *s; ++s)
		outb((unsigned char)*s, 0xE9);
}

/* A line to the console and to the hypervisor's channel. */
void emit(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	printf("%s\n", buf);
	fflush(stdout);
	e9_write(buf);
	e9_write("\n");
}

static int failures;

void result(const char *check, int pass, const char *fmt, ...)
{
	char detail[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	if (!pass)
		++failures;
	emit("HVKIT-GUEST RESULT %s %s %s", check, pass ? "PASS" : "FAIL", detail);
}

static void raw_cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
	__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* MSR access through the msr driver (/dev/cpu/0/msr: the offset is the MSR index). */
static int msr_read(unsigned msr, uint64_t *v)
{
	int fd = open("/dev/cpu/0/msr", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, v, 8, msr);
	close(fd);
	return n == 8 ? 0 : -errno;
}

static int msr_write(unsigned msr, uint64_t v)
{
	int fd = open("/dev/cpu/0/msr", O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pwrite(fd, &v, 8, msr);
	close(fd);
	return n == 8 ? 0 : -errno;
}

static char *read_file(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	ssize_t n, total = 0;

	if (fd < 0)
		return NULL;
	while ((n = read(fd, buf + total, sizeof buf - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = '\0';
	return buf;
}

static unsigned long sys_ulong(const char *path)
{
	char *s = read_file(path);

	return s ? strtoul(s, NULL, 0) : (unsigned long)-1;
}

static void checks(void)
{
	static const unsigned leaves[][2] = {{0, 0},          {1, 0},          {6, 0},          {7, 0},
					     {7, 1},          {0xd, 0},        {0xd, 1},        {0xd, 2},
					     {0x14, 0},       {0x80000001, 0}, {0x80000007, 0}, {0x80000008, 0},
					     {0x40000000, 0}, {0x40000001, 0}};
	unsigned r[4], i;
	char sig[13];
	char *cpuinfo, *flags, *end;
	uint64_t v;
	int rc, ibpb;

	/* 1. Raw CPUID as the guest sees it (the runner compares with the policy). */
	for (i = 0; i < sizeof leaves / sizeof leaves[0]; ++i) {
		raw_cpuid(leaves[i][0], leaves[i][1], r);
		emit("HVKIT-GUEST CPUID 0x%08x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x", leaves[i][0], leaves[i][1], r[0], r[1],
		     r[2], r[3]);
	}
	/* 2. The hypervisor signature and the paravirtual features the guest is offered. */
	raw_cpuid(0x40000000, 0, r);
	unsigned max_hv_leaf = r[0];
	memcpy(sig, &r[1], 4);
	memcpy(sig + 4, &r[2], 4);
	memcpy(sig + 8, &r[3], 4);
	sig[12] = '\0';
	{
		unsigned pv;

		raw_cpuid(0x40000001, 0, r);
		pv = r[0];
		emit("HVKIT-GUEST SIGNATURE %s max_leaf=0x%x pv_features=0x%x hints=0x%x", sig, max_hv_leaf, pv, r[3]);
	}
	/* 3. The flags Linux concluded from CPUID. */
	cpuinfo = read_file("/proc/cpuinfo");
	flags = cpuinfo ? strstr(cpuinfo, "\nflags") : NULL;
	if (flags) {
		flags = strchr(flags, ':');
		end = strchr(flags, '\n');
		if (end)
			*end = '\0';
		emit("HVKIT-GUEST FLAGS%s", flags + 1);
	} else {
		emit("HVKIT-GUEST FLAGS (no flags line in /proc/cpuinfo)");
	}
	/* 4. IA32_PRED_CMD (0x49): writing IBPB (bit 0) succeeds exactly when CPUID enumerates
	 * IBPB (CPUID.7.0:EDX[26] on Intel, SDM Vol. 4 Table 2-2; CPUID.80000008H:EBX[12] on AMD). */
	raw_cpuid(7, 0, r);
	ibpb = (r[3] >> 26) & 1;
	raw_cpuid(0x80000008, 0, r);
	ibpb |= (r[1] >> 12) & 1;
	rc = msr_write(0x49, 1);
	if (rc == -ENOENT || rc == -ENXIO || rc == -ENODEV) {
		result("pred_cmd_write", 0, "reason=no_/dev/cpu/0/msr errno=%d", -rc);
	} else {
		result("pred_cmd_write", (rc == 0) == ibpb, "ibpb_advertised=%d write=%s", ibpb,
		       rc == 0 ? "ok" : "#GP(EIO)");
	}
	/* 5. An MSR nobody defines (0x6789): RDMSR #GP, seen as EIO; and the guest survives. */
	rc = msr_read(0x6789, &v);
	result("unknown_msr_gp", rc == -EIO, "msr=0x6789 read=%s", rc == 0 ? "succeeded" : rc == -EIO ? "#GP(EIO)" : "other");
	/* 5b. IA32_APIC_BASE (0x1B; SDM Vol. 3A 11.4.4, 11.12.5): writing the value back succeeds;
	 * a reserved bit (9) #GPs, as on any CPU; EXTD #GPs where CPUID has no x2APIC
	 * (CPUID.1:ECX[21], 11.12.1); moving the APIC page #GPs (the hypervisor passes the APIC
	 * through at the page it found at boot, docs/linux-guest.md). Each failed write leaves
	 * the MSR as it was. */
	{
		uint64_t base = 0, after = 0;
		int got, same, reserved, moved, extd = -EIO, x2apic;

		raw_cpuid(1, 0, r);
		x2apic = (r[2] >> 21) & 1;
		got = msr_read(0x1b, &base);
		same = msr_write(0x1b, base);
		reserved = msr_write(0x1b, base | (1u << 9));
		moved = msr_write(0x1b, base + 0x100000);
		if (!x2apic)
			extd = msr_write(0x1b, base | (1u << 10));
		msr_read(0x1b, &after);
		result("apic_base_writes",
		       got == 0 && same == 0 && reserved == -EIO && moved == -EIO && extd == -EIO && after == base,
		       "base=0x%llx x2apic_advertised=%d write_back=%s reserved_bit9=%s moved=%s extd=%s after=0x%llx",
		       (unsigned long long)base, x2apic, same == 0 ? "ok" : "failed",
		       reserved == -EIO ? "#GP(EIO)" : "accepted", moved == -EIO ? "#GP(EIO)" : "accepted",
		       x2apic ? "not_tried" : extd == -EIO ? "#GP(EIO)" : "accepted", (unsigned long long)after);
	}
	/* 6. CR0.WP toggles from the hvkit_wp kernel module. */
	{
		unsigned long ot = sys_ulong("/sys/module/hvkit_wp/parameters/owned_toggles");
		unsigned long oe = sys_ulong("/sys/module/hvkit_wp/parameters/owned_exits");
		unsigned long om = sys_ulong("/sys/module/hvkit_wp/parameters/owned_mismatches");
		unsigned long it = sys_ulong("/sys/module/hvkit_wp/parameters/intercepted_toggles");
		unsigned long ie = sys_ulong("/sys/module/hvkit_wp/parameters/intercepted_exits");
		unsigned long im = sys_ulong("/sys/module/hvkit_wp/parameters/intercepted_mismatches");
		/* Under shadow paging WP cannot be guest-owned (the hypervisor says so at HC_WP_BEGIN):
		 * then the "guest-owned" run exits once per toggle too. */
		unsigned long always = sys_ulong("/sys/module/hvkit_wp/parameters/wp_always_intercepted");
		unsigned long owned_want = always == 1 ? ot : 0;

		result("cr0_wp_toggles", ot == 10000 && oe == owned_want && om == 0 && it == 10000 && ie == it && im == 0,
		       "guest_owned_toggles=%lu guest_owned_cr_exits=%lu intercepted_toggles=%lu intercepted_cr_exits=%lu "
		       "mismatches=%lu/%lu wp_always_intercepted=%lu owned_tsc=%lu intercepted_tsc=%lu",
		       ot, oe, it, ie, om, im, always,
		       sys_ulong("/sys/module/hvkit_wp/parameters/owned_tsc"),
		       sys_ulong("/sys/module/hvkit_wp/parameters/intercepted_tsc"));
	}
	/* 7. VMXON and an invalid XSETBV from the kernel module: both must fault (#UD, #GP). */
	{
		unsigned long vmx = sys_ulong("/sys/module/hvkit_wp/parameters/vmxon_faulted");
		unsigned long xs = sys_ulong("/sys/module/hvkit_wp/parameters/xsetbv_invalid_faulted");

		result("vmxon_faults", vmx == 1, "vmxon_faulted=%ld", (long)vmx);
		result("xsetbv_invalid_faults", xs == 1, "xcr0=0x5 xsetbv_faulted=%ld", (long)xs);
	}
	/* 8. The processors and cross-CPU wake-ups (hvtest_smp.c). */
	smp_checks();
	emit("HVKIT-GUEST CHECKS done failures=%d", failures);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: hvtest e9 TEXT... | checks | shutdown\n");
		return 2;
	}
	e9_ok = ioperm(0xE9, 1, 1) == 0;
	if (!strcmp(argv[1], "e9")) {
		int i;
		for (i = 2; i < argc; ++i) {
			e9_write(argv[i]);
			e9_write(i + 1 < argc ? " " : "");
		}
		e9_write("\n");
		return 0;
	}
	if (!strcmp(argv[1], "checks")) {
		smp_pin_cpu0();
		checks();
		return failures ? 1 : 0;
	}
	if (!strcmp(argv[1], "shutdown")) {
		const char *s = "Shutdown";
		if (ioperm(0x8900, 1, 1) != 0)
			return 1;
		for (; *s; ++s)
			outb((unsigned char)*s, 0x8900);
		return 0;
	}
	return 2;
}
