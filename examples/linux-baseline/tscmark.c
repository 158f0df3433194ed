// SPDX-License-Identifier: MIT
/* tscmark: the in-guest time stamp of the bare-Bochs Linux baseline (no libc, static).
 *
 *   tscmark e9 TEXT...   writes "TEXT tsc=<RDTSC>\n" to port 0xE9; RDTSC is read after
 *                        TEXT went out, just before the newline, the moment at which the
 *                        hvkit hypervisor time-stamps a guest line it intercepts on 0xE9
 *   tscmark tsc          prints the raw TSC on stdout (for deltas around a workload)
 *   tscmark shutdown     writes "Shutdown" to port 0x8900: Bochs ends the simulation
 *
 * Port access with iopl(3) (the process runs as root in the initramfs).
 */
typedef unsigned long u64;

static long sys3(long nr, long a, long b, long c)
{
	long ret;

	asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

enum { sys_write = 1, sys_iopl = 172, sys_exit = 60 };

static void outb(unsigned short port, unsigned char v)
{
	asm volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static u64 rdtsc(void)
{
	unsigned lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((u64)hi << 32) | lo;
}

static int streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		++a, ++b;
	return *a == *b;
}

static void port_str(unsigned short port, const char *s)
{
	for (; *s; ++s)
		outb(port, (unsigned char)*s);
}

static char *utoa(u64 v, char *end)
{
	*--end = '\0';
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

static int run(int argc, char **argv)
{
	char buf[32];

	if (argc >= 2 && streq(argv[1], "tsc")) {
		char *s = utoa(rdtsc(), buf + sizeof buf - 1);
		int n = 0;

		while (s[n])
			++n;
		s[n] = '\n';
		sys3(sys_write, 1, (long)s, n + 1);
		return 0;
	}
	if (sys3(sys_iopl, 3, 0, 0) != 0)
		return 2;
	if (argc >= 2 && streq(argv[1], "shutdown")) {
		port_str(0x8900, "Shutdown");
		return 1;  /* still here: not Bochs */
	}
	if (argc >= 2 && streq(argv[1], "e9")) {
		for (int i = 2; i < argc; ++i) {
			if (i > 2)
				outb(0xE9, ' ');
			port_str(0xE9, argv[i]);
		}
		u64 t = rdtsc();
		port_str(0xE9, " tsc=");
		port_str(0xE9, utoa(t, buf + sizeof buf));
		outb(0xE9, '\n');
		return 0;
	}
	return 2;
}

/* The kernel's initial stack: argc, argv[0..argc-1], NULL, envp... */
void start_c(long *sp);
__attribute__((used)) void start_c(long *sp)
{
	sys3(sys_exit, run((int)sp[0], (char **)(sp + 1)), 0, 0);
}

asm(".globl _start\n_start:\n\tmov %rsp, %rdi\n\tand $-16, %rsp\n\tcall start_c\n\thlt\n");
