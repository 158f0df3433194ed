// SPDX-License-Identifier: MIT
/* hvtest's SMP checks (linked into hvtest, called from its checks): the processors Linux
 * brought up, the same CPUID flags on each, and wake-ups between threads pinned to different
 * CPUs, each a cross-CPU wake-up (a rescheduling or function-call IPI unless the target
 * polls in its idle loop), none lost.
 *
 *   HVKIT-GUEST SMP online=<n> configured=<n> cpuinfo_processors=<n> flags_identical=0|1
 *   HVKIT-GUEST IPI cpu=<k> rounds=<n> wakeups=<n> lost=<n> tsc_per_wakeup=<n> res=<n> cal=<n>
 *   HVKIT-GUEST RESULT smp_cpuinfo / smp_wakeups PASS|FAIL ...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

void emit(const char *fmt, ...);
void result(const char *check, int pass, const char *fmt, ...);

enum { rounds = 2000 };

static volatile int seq;
static unsigned long lost;

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof s, &s);
}

/* Waits until seq == want: a blocking futex wait (the CPU goes idle), with a 2 s timeout
 * that counts as a lost wake-up (and keeps waiting). */
static void wait_for(int want)
{
	for (;;) {
		int now = __atomic_load_n(&seq, __ATOMIC_ACQUIRE);
		struct timespec ts = {2, 0};

		if (now == want)
			return;
		if (syscall(SYS_futex, &seq, FUTEX_WAIT_PRIVATE, now, &ts, NULL, 0) == -1 && errno == ETIMEDOUT &&
		    __atomic_load_n(&seq, __ATOMIC_ACQUIRE) != want)
			++lost;
	}
}

static void post(int v)
{
	__atomic_store_n(&seq, v, __ATOMIC_RELEASE);
	syscall(SYS_futex, &seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *partner(void *arg)
{
	int i;

	pin((int)(intptr_t)arg);
	for (i = 0; i < rounds; ++i) {
		wait_for(2 * i + 1);
		post(2 * i + 2);
	}
	return NULL;
}

/* Sum of one /proc/interrupts row ("RES:" or "CAL:") over the CPUs, or for one CPU. */
static unsigned long irq_row(const char *tag, int only_cpu)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[4096];
	unsigned long sum = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		char *p = line;
		int cpu = 0;

		while (*p == ' ')
			++p;
		if (strncmp(p, tag, strlen(tag)) != 0)
			continue;
		p += strlen(tag);
		for (;;) {
			char *end;
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (only_cpu < 0 || only_cpu == cpu)
				sum += v;
			++cpu;
			p = end;
		}
	}
	fclose(f);
	return sum;
}

/* A numeric parameter of the hvkit_wp module, 0 if it cannot be read. */
static unsigned long module_ulong(const char *name)
{
	char path[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof path, "/sys/module/hvkit_wp/parameters/%s", name);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static char *slurp(const char *path)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The checks run on CPU 0: CPUID answers per vCPU (its APIC ID in leaf 1 EBX[31:24]), and
 * the hypervisor prints the policy as vCPU 0 sees it. */
void smp_pin_cpu0(void)
{
	pin(0);
}

void smp_checks(void)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN), configured = sysconf(_SC_NPROCESSORS_CONF);
	char *info = slurp("/proc/cpuinfo"), *p, *first = NULL;
	int processors = 0, identical = 1, k;
	size_t first_len = 0;
	unsigned long total_wakeups = 0, total_lost = 0;

	/* /proc/cpuinfo: one "processor" block per CPU, the same flags line in every one. */
	for (p = info; p && (p = strstr(p, "processor")) != NULL; ++p)
		if (p == info || p[-1] == '\n')
			++processors;
	for (p = info; p && (p = strstr(p, "\nflags")) != NULL; ++p) {
		char *e = strchr(p + 1, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (!first) {
			first = p;
			first_len = len;
		} else if (len != first_len || memcmp(p, first, len) != 0) {
			identical = 0;
		}
	}
	emit("HVKIT-GUEST SMP online=%ld configured=%ld cpuinfo_processors=%d flags_identical=%d", online, configured,
	     processors, identical);
	result("smp_cpuinfo", processors == online && identical && first != NULL,
	       "online=%ld cpuinfo_processors=%d flags_identical=%d", online, processors, identical);
	/* Wake-ups between CPU 0 and every other CPU, each way once per round. */
	for (k = 1; k < online; ++k) {
		pthread_t t;
		unsigned long res0 = irq_row("RES:", -1), cal0 = irq_row("CAL:", -1);
		uint64_t t0;
		int i;

		pin(0);
		seq = 0;
		lost = 0;
		if (pthread_create(&t, NULL, partner, (void *)(intptr_t)k) != 0) {
			result("smp_wakeups", 0, "pthread_create failed");
			return;
		}
		t0 = __rdtsc();
		for (i = 0; i < rounds; ++i) {
			post(2 * i + 1);
			wait_for(2 * i + 2);
		}
		t0 = __rdtsc() - t0;
		pthread_join(t, NULL);
		emit("HVKIT-GUEST IPI cpu=%d rounds=%d wakeups=%d lost=%lu tsc_per_wakeup=%llu res=%lu cal=%lu", k, rounds,
		     2 * rounds, lost, (unsigned long long)(t0 / (2 * rounds)), irq_row("RES:", -1) - res0,
		     irq_row("CAL:", -1) - cal0);
		total_wakeups += 2 * rounds;
		total_lost += lost;
	}
	pin(0);
	if (online > 1) {
		unsigned long one = 0, all = 0, calls = 0, send_one = 0, send_mask = 0, send_mask_abs = 0, send_abs = 0;
		FILE *f;

		if ((f = fopen("/sys/module/hvkit_wp/parameters/ipi_tsc_one", "r"))) {
			if (fscanf(f, "%lu", &one) != 1)
				one = 0;
			fclose(f);
		}
		if ((f = fopen("/sys/module/hvkit_wp/parameters/ipi_tsc_all", "r"))) {
			if (fscanf(f, "%lu", &all) != 1)
				all = 0;
			fclose(f);
		}
		if ((f = fopen("/sys/module/hvkit_wp/parameters/ipi_calls", "r"))) {
			if (fscanf(f, "%lu", &calls) != 1)
				calls = 0;
			fclose(f);
		}
		send_one = module_ulong("ipi_tsc_send_one");
		send_mask = module_ulong("ipi_tsc_send_mask");
		send_mask_abs = module_ulong("ipi_tsc_send_mask_allbutself");
		send_abs = module_ulong("ipi_tsc_send_allbutself");
		emit("HVKIT-GUEST IPICOST cpus=%ld calls=%lu tsc_one_target=%lu tsc_all_but_self=%lu send_ipi=%lu "
		     "send_ipi_mask_one=%lu send_ipi_mask_allbutself=%lu send_ipi_allbutself=%lu", online, calls, one, all,
		     send_one, send_mask, send_mask_abs, send_abs);
	}
	if (online > 1)
		result("smp_wakeups", total_lost == 0 && total_wakeups == (unsigned long)(2 * rounds * (online - 1)),
		       "cpus=%ld wakeups=%lu lost=%lu", online, total_wakeups, total_lost);
}
