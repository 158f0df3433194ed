# SPDX-License-Identifier: MIT
# gdb -q -batch -x loop_trace.py --args EXE ARGS...   (used by loop_chain.sh)
# With HEAD (the loop head's offset in EXE, hex), OUT (output file) and SKIP (head hits to
# let pass first, so that the traced iteration is a steady-state one) in the environment:
# writes one loop iteration from HEAD back to HEAD, one line per executed instruction:
# offset, instruction, effective address of its memory operand (evaluated before the
# instruction executes; empty if none), rsp.
import gdb, os, re
head = int(os.environ['HEAD'], 16)
out = open(os.environ['OUT'], 'w')
gdb.execute('set pagination off')
gdb.execute('starti', to_string=True)
mappings = gdb.execute('info proc mappings', to_string=True)
exe = gdb.current_progspace().filename
base = None
for line in mappings.splitlines():
    parts = line.split()
    if len(parts) >= 5 and parts[-1] == exe:
        base = int(parts[0], 16); break
addr = base + head
gdb.execute('break *0x%x' % addr, to_string=True)
for _ in range(int(os.environ.get('SKIP', '1'))):
    gdb.execute('continue', to_string=True)
mem_re = re.compile(r'(-?0x[0-9a-f]+|-?\d+)?\((%\w+)?(?:,(%\w+)(?:,(\d))?)?\)')
def reg(name):
    return int(gdb.parse_and_eval('(unsigned long)$' + name)) & 0xffffffffffffffff
def reg64(r):
    r = r.lstrip('%')
    return r
n = 0
while True:
    frame = gdb.selected_frame()
    pc = frame.pc()
    insn = frame.architecture().disassemble(pc)[0]['asm']
    ea = ''
    text = insn.split('#')[0]
    m = mem_re.search(text) if not text.startswith(('lea', 'nop')) else None
    if m and 'rip' not in (m.group(2) or ''):
        disp = int(m.group(1), 0) if m.group(1) else 0
        b = reg(m.group(2).lstrip('%')) if m.group(2) else 0
        i = reg(m.group(3).lstrip('%')) if m.group(3) else 0
        s = int(m.group(4)) if m.group(4) else 1
        # sub-registers in addresses are rare; gdb evaluates $eax etc. too
        ea = '%x' % ((disp + b + i * s) & 0xffffffffffffffff)
    out.write('%x\t%s\t%s\t%x\n' % (pc - base, insn, ea, reg('rsp')))
    gdb.execute('stepi', to_string=True)
    n += 1
    if gdb.selected_frame().pc() == addr or n > 20000:
        break
out.close()
