#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""loop_chain.py TRACE ACC [--show]: the loop-carried dependency chain of one traced loop
iteration (loop_trace.py's output: offset, instruction, effective address of its memory
operand, rsp), from register ACC at the loop head to ACC at the next head (see
loop_chain.sh). Data flow through registers (by 64-bit family; a move is free), flags and
memory (per byte, at the traced addresses); the longest latency path under two models, with
every store-to-load round trip on it ("fwd": a load of bytes a store on the chain wrote).
Branches are taken as predicted (control dependences are not followed)."""
import re, sys
FAM = {}
for r in 'abcd':
    for n in ('r%sx', 'e%sx', '%sx', '%sl', '%sh'):
        FAM[n % r] = 'r%sx' % r
for r in ('si', 'di', 'bp', 'sp'):
    for n in ('r' + r, 'e' + r, r, r + 'l'):
        FAM[n] = 'r' + r
for i in range(8, 16):
    for s in ('', 'd', 'w', 'b'):
        FAM['r%d%s' % (i, s)] = 'r%d' % i
def width(r):
    if r.startswith(('xmm',)): return 16
    if r.startswith('ymm'): return 32
    if r in ('al','bl','cl','dl','ah','bh','ch','dh','sil','dil','bpl','spl') or re.fullmatch(r'r\d+b', r): return 1
    if r in ('ax','bx','cx','dx','si','di','bp','sp') or re.fullmatch(r'r\d+w', r): return 2
    if r.startswith('e') or re.fullmatch(r'r\d+d', r): return 4
    return 8
def fam(r):
    return FAM.get(r, r)
# Latencies in cycles: 'intel' a Skylake-class core (a load [base + index] 5, a forward
# through the store buffer about 4.5), 'zen' a core that renames a store and the load of the
# same stack slot (load 4, forward about 1).
MODELS = {'intel': dict(load=5, fwd=4.5, alu=1), 'zen': dict(load=4, fwd=1, alu=1)}

def split_ops(s):
    ops, depth, cur = [], 0, ''
    for ch in s:
        if ch == '(': depth += 1
        if ch == ')': depth -= 1
        if ch == ',' and depth == 0:
            ops.append(cur.strip()); cur = ''
        else:
            cur += ch
    if cur.strip(): ops.append(cur.strip())
    return ops

mem_re = re.compile(r'^(-?0x[0-9a-f]+|-?\d+)?\((%\w+)?(?:,(%\w+)(?:,(\d))?)?\)$')
def parse(insn):
    t = insn.split('#')[0].strip()
    t = re.sub(r'^(rep |repz |lock |notrack |bnd )', '', t)
    parts = t.split(None, 1)
    op = parts[0]
    ops = split_ops(parts[1]) if len(parts) > 1 else []
    return op, ops

def analyze(lines, acc, model, show=False):
    L = MODELS[model]
    regs = {fam(acc): (0.0, None)}  # family -> (ready time, node) for tainted values only
    memb = {}  # byte address -> (ready, node, is_store_node)
    nodes = []  # (idx, insn, kind, pred)
    def rd(r):
        return regs.get(fam(r))
    def addr_deps(o):
        m = mem_re.match(o)
        ds = []
        if m:
            for g in (m.group(2), m.group(3)):
                if g and rd(g.lstrip('%')): ds.append((rd(g.lstrip('%')), 'addr'))
        return ds
    for idx, (pc, insn, ea, rsp) in enumerate(lines):
        op, ops = parse(insn)
        if op.startswith(('j', 'nop', 'xchg', 'endbr', 'cs', 'data16')) and op != 'xchg' or op in ('nopw', 'nopl'):
            continue
        if op == 'xchg' and ops and ops[0] == ops[-1]:
            continue
        def is_mem(o): return '(' in o and not o.startswith('$')
        def is_reg(o): return o.startswith('%')
        memop = [o for o in ops if is_mem(o)]
        size = None
        for o in ops:
            if is_reg(o): size = width(o.lstrip('%')); break
        sfx = {'b': 1, 'w': 2, 'l': 4, 'q': 8}
        if op in ('movzbl', 'movzbw', 'movzbq', 'movsbl', 'movsbq', 'movsbw'): msize = 1
        elif op in ('movzwl', 'movzwq', 'movswl', 'movswq'): msize = 2
        elif op in ('movslq',): msize = 4
        elif op in ('movaps', 'movdqa', 'movups', 'movdqu', 'movapd'): msize = 16
        elif op in ('movq',) and any(o.startswith('%xmm') for o in ops): msize = 8
        elif op[-1] in sfx and op not in ('sub', 'sbb', 'shl', 'sal', 'and', 'adc', 'mul', 'imul', 'bsf', 'bsr', 'neg', 'not', 'or', 'cmp', 'xor', 'test', 'add', 'rol', 'ror', 'shr', 'sar', 'bt', 'dec', 'inc', 'xchg', 'bts', 'btr', 'btc', 'lea', 'pop', 'push', 'movabs', 'mov', 'call', 'ret', 'leave') and not op.startswith(('set', 'cmov', 'j')):
            msize = sfx[op[-1]]
        else: msize = size or 8
        def load(o):
            """value read from memory operand o: (ready, node) or None"""
            a = int(ea, 16) if ea else None
            best = None
            for d in addr_deps(o):
                cand = (d[0][0] + L['load'], ('load-addr', d[0][1]))
                if best is None or cand[0] > best[0]: best = cand
            if a is not None:
                fwd = None
                for b in range(a, a + msize):
                    v = memb.get(b)
                    if v and (fwd is None or v[0] > fwd[0]): fwd = v
                if fwd:
                    cand = (fwd[0] + L['fwd'], ('fwd', fwd[1]))
                    if best is None or cand[0] > best[0]: best = cand
            if best is None: return None
            nodes.append((idx, pc, insn, best[1][0], best[1][1]))
            return (best[0], len(nodes) - 1)
        def store(o, val):
            a = int(ea, 16)
            # the store's data: val (ready, node) or None (untainted)
            for b in range(a, a + msize):
                if val: memb[b] = val
                else: memb.pop(b, None)
        def setreg(r, val, partial=False):
            r = r.lstrip('%')
            f = fam(r)
            if partial and width(r) < 4 and f in regs:
                old = regs[f]
                if val is None or old[0] > val[0]: val = old
            if val: regs[f] = val
            else: regs.pop(f, None)
        def combine(srcs, lat, kind='alu'):
            srcs = [s for s in srcs if s]
            if not srcs: return None
            s = max(srcs, key=lambda x: x[0])
            nodes.append((idx, pc, insn, kind, s[1]))
            return (s[0] + lat, len(nodes) - 1)
        def val_of(o):
            if o.startswith('$'): return None
            if is_mem(o): return load(o)
            return rd(o.lstrip('%'))
        # zero idioms
        if op in ('xor', 'pxor', 'sub', 'xorps', 'vpxor') and len(ops) == 2 and ops[0] == ops[1]:
            setreg(ops[1], None); regs.pop('flags', None); continue
        if op == 'push':
            a = int(ea, 16) if ea else rsp - 8
            ea = '%x' % (rsp - 8); msize = 8
            store(None, val_of(ops[0])); continue
        if op == 'pop':
            ea = '%x' % rsp; msize = 8
            setreg(ops[0], load('(%rsp)')); continue
        if op == 'call':
            ea = '%x' % (rsp - 8); msize = 8; store(None, None); continue
        if op in ('ret', 'retq'):
            continue
        if op == 'leave':
            continue
        if op.startswith('stos') or op.startswith('movs') and op not in ('movsbl', 'movsbq', 'movswl', 'movslq', 'movsbw', 'movswq', 'movss', 'movsd'):
            continue
        if op in ('cltq', 'cqto', 'cltd', 'cwtl'):
            setreg('rax', combine([rd('rax')], L['alu'])); continue
        if op.startswith('cmov'):
            v = combine([val_of(ops[0]), rd(ops[1].lstrip('%')), regs.get('flags')], L['alu'])
            setreg(ops[1], v); continue
        if op.startswith('set'):
            v = combine([regs.get('flags')], L['alu'])
            if is_mem(ops[0]): store(ops[0], v)
            else: setreg(ops[0], v, partial=True)
            continue
        if op in ('cmp', 'test', 'bt', 'cmpb', 'cmpl', 'cmpq', 'cmpw', 'testb', 'testl', 'testq', 'testw', 'ucomisd', 'comisd', 'ptest'):
            regs['flags'] = None
            v = combine([val_of(o) for o in ops], L['alu'])
            if v: regs['flags'] = v
            else: regs.pop('flags', None)
            continue
        if op == 'lea':
            v = combine([d[0] for d in addr_deps(ops[0])], L['alu'])
            setreg(ops[1], v); continue
        if op in ('movhps', 'movlps', 'movhpd', 'movlpd', 'pinsrq', 'pinsrd', 'punpcklqdq', 'unpcklpd', 'shufps', 'shufpd', 'punpckhqdq', 'por', 'pand', 'paddq') and not is_mem(ops[-1]):
            v = combine([val_of(o) for o in ops if not o.startswith('$')], L['alu'])
            setreg(ops[-1], v); continue
        if op.startswith('mov') or op in ('vmovdqa', 'vmovdqu'):
            src, dst = ops[0], ops[1]
            v = val_of(src)
            if is_mem(dst): store(dst, v)
            else:
                # a register-to-register move: renamed (0 latency), no new node
                setreg(dst, v, partial=(op in ('mov', 'movb', 'movw') and width(dst.lstrip('%')) < 4))
            continue
        # generic ALU: op src, dst (or op dst)
        if len(ops) == 0: continue
        dst = ops[-1]
        srcs = [val_of(o) for o in ops]  # dst is read too (read-modify-write)
        if op in ('adc', 'sbb', 'rcl', 'rcr'): srcs.append(regs.get('flags'))
        if op in ('shl', 'shr', 'sar', 'rol', 'ror', 'sal') and len(ops) == 2 and ops[0] == '%cl':
            pass
        lat = L['alu']
        if op.startswith(('imul', 'mul')): lat = 3
        v = combine(srcs, lat)
        if is_mem(dst): store(dst, v)
        else: setreg(dst, v, partial=width(dst.lstrip('%')) < 4 if dst.startswith('%') else False)
        if v: regs['flags'] = v
        else: regs.pop('flags', None)
    end = regs.get(fam(acc))
    if not end:
        return None
    # backtrack
    path = []
    n = end[1]
    while n is not None:
        idx, pc, insn, kind, pred = nodes[n]
        path.append((pc, insn, kind))
        n = pred
    path.reverse()
    return end[0], path

def main():
    lines = []
    for l in open(sys.argv[1]):
        p = l.rstrip('\n').split('\t')
        if len(p) < 4: continue
        lines.append((p[0], p[1], p[2], int(p[3], 16)))
    acc = sys.argv[2].lstrip('%')
    for model in ('intel', 'zen'):
        r = analyze(lines, acc, model)
        if r is None:
            print(model, 'no chain'); continue
        t, path = r
        fw = [p for p in path if p[2] == 'fwd']
        loads = [p for p in path if p[2] in ('load-addr',)]
        print('%s: %d instructions per iteration, chain %.1f cycles, %d loads and %d store-to-load round trips on it' % (model, len(lines), t, len(loads), len(fw)))
        if model == 'intel':
            for pc, insn, kind in path:
                if kind == 'fwd' or '--show' in sys.argv:
                    print('   %s %-9s %s' % (pc, kind, insn.split('#')[0].strip()[:70]))
main()
