// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The kernel's x86 instruction decoder (compiled in from the kernel tree, as
 * objtool and perf do) and the per-instruction rules of the x86 kprobes
 * code: can_probe()'s exception check, __copy_instruction(),
 * prepare_emulation(), can_boost() (for the jump optimization) and the
 * callopt patch's allowlist, callopt_insn_ok(). The function-level rules (exception tables, reserved
 * ranges, jumps into a jump-optimized region) need more than one
 * instruction and live in explain.c.
 *
 * This file is compiled with the kernel's tools/ include paths and must not
 * include libbpf or UAPI headers.
 */
#include <stdio.h>
#include <string.h>

#define unlikely(cond) (cond)
#include "inat.c"
#include "insn.c"

#include "x86_rules.h"

#define W(row, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, ba, bb, bc, bd, be, bf)\
	(((b0##UL << 0x0)|(b1##UL << 0x1)|(b2##UL << 0x2)|(b3##UL << 0x3) |   \
	  (b4##UL << 0x4)|(b5##UL << 0x5)|(b6##UL << 0x6)|(b7##UL << 0x7) |   \
	  (b8##UL << 0x8)|(b9##UL << 0x9)|(ba##UL << 0xa)|(bb##UL << 0xb) |   \
	  (bc##UL << 0xc)|(bd##UL << 0xd)|(be##UL << 0xe)|(bf##UL << 0xf))    \
	 << (row % 32))
/* arch/x86/kernel/kprobes/core.c: twobyte_is_boostable */
static const unsigned int twobyte_is_boostable[256 / 32] = {
	/*      0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f          */
	W(0x00, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0) | /* 00 */
	W(0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1) , /* 10 */
	W(0x20, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) | /* 20 */
	W(0x30, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) , /* 30 */
	W(0x40, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1) | /* 40 */
	W(0x50, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) , /* 50 */
	W(0x60, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1) | /* 60 */
	W(0x70, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1) , /* 70 */
	W(0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) | /* 80 */
	W(0x90, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1) , /* 90 */
	W(0xa0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1) | /* a0 */
	W(0xb0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1) , /* b0 */
	W(0xc0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1) | /* c0 */
	W(0xd0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1) , /* d0 */
	W(0xe0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1) | /* e0 */
	W(0xf0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0)   /* f0 */
	/*      -----------------------------------------------         */
	/*      0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f          */
};
#undef W

static bool twobyte_boostable(unsigned char op)
{
	return (twobyte_is_boostable[op / 32] >> (op % 32)) & 1;
}

/* can_boost(), less its search_exception_tables() check (explain.c has it). */
static const char *boost_refusal(struct insn *insn)
{
	unsigned char op = insn->opcode.bytes[0];
	unsigned char reg = X86_MODRM_REG(insn->modrm.bytes[0]);
	insn_byte_t prefix;
	int i;

	if (insn->opcode.nbytes == 2)
		return twobyte_boostable(insn->opcode.bytes[1]) ? NULL :
		       "two-byte opcode not in twobyte_is_boostable";
	if (insn->opcode.nbytes != 1)
		return "three-byte opcode";
	for_each_insn_prefix(insn, i, prefix) {
		insn_attr_t attr = inat_get_opcode_attribute(prefix);

		if (prefix == 0x2e || inat_is_address_size_prefix(attr))
			return "CS or address-size prefix";
	}
	switch (op) {
	case 0x62:
		return "bound";
	case 0x70 ... 0x7f:
		return "conditional jump";
	case 0x9a:
		return "far call";
	case 0xcc ... 0xce:
		return "software exception";
	case 0xd6:
		return "undefined opcode";
	case 0xd8 ... 0xdf:
		return "x87 escape";
	case 0xe0 ... 0xe3:
		return "loop/jcxz";
	case 0xe8:
		return "call";
	case 0xe9:
	case 0xeb:
		return "jmp";
	case 0xf0 ... 0xf4:
		return "lock/rep/hlt";
	case 0xc0 ... 0xc1:
	case 0xd0 ... 0xd3:
		return reg != 6 ? NULL : "Grp2 /6";
	case 0xf6 ... 0xf7:
		return reg != 1 ? NULL : "Grp3 /1";
	case 0xfe:
		return reg <= 1 ? NULL : "Grp4 other than inc/dec";
	case 0xff:
		return reg <= 1 || reg == 4 ? NULL :
		       "Grp5 other than inc/dec/indirect jmp";
	}
	return NULL;
}

/* MOVS, CMPS, STOS, LODS, SCAS and INS, OUTS: REP repeats them */
static bool is_string_insn(struct insn *insn)
{
	unsigned char op0 = insn->opcode.bytes[0];

	return insn->opcode.nbytes == 1 &&
	       ((op0 >= 0x6c && op0 <= 0x6f) || (op0 >= 0xa4 && op0 <= 0xa7) ||
		(op0 >= 0xaa && op0 <= 0xaf));
}

/*
 * callopt_insn_ok() of the callopt patch (opt.c): an allowlist of opcodes
 * (with their ModRM.reg and form) and of the prefixes each may carry. The
 * tables are opt.c's callopt_ops1[] and callopt_ops2[], entry for entry.
 */
#define CO_ANY		0xff
#define CO_R(n)		(1u << (n))
enum {
	CO_OK = 1, CO_MEM = 2, CO_LOCK = 4, CO_F3 = 8, CO_F3_ONLY = 16, CO_NO66 = 32,
};
struct callopt_op {
	unsigned char flags, regs;
};
#define CO(f)		{ .flags = CO_OK | (f), .regs = CO_ANY }
#define COG(f, r)	{ .flags = CO_OK | (f), .regs = (r) }
#define CO_ALU(op)	[op] = CO(CO_LOCK), [(op) + 1] = CO(CO_LOCK),		\
			[(op) + 2] = CO(0), [(op) + 3] = CO(0),			\
			[(op) + 4] = CO(0), [(op) + 5] = CO(0)

static const struct callopt_op callopt_ops1[256] = {
	CO_ALU(0x00), CO_ALU(0x08), CO_ALU(0x10), CO_ALU(0x18),
	CO_ALU(0x20), CO_ALU(0x28), CO_ALU(0x30),
	[0x38 ... 0x3d] = CO(0),
	[0x50 ... 0x5f] = CO(0),
	[0x63] = CO(0),
	[0x68] = CO(0), [0x69] = CO(0), [0x6a] = CO(0), [0x6b] = CO(0),
	[0x80 ... 0x81] = CO(CO_LOCK), [0x83] = CO(CO_LOCK),
	[0x84 ... 0x85] = CO(0),
	[0x86 ... 0x87] = CO(CO_LOCK),
	[0x88 ... 0x8b] = CO(0), [0x8c] = COG(0, 0x3f), [0x8d] = CO(CO_MEM),
	[0x8f] = COG(0, CO_R(0)),
	[0x90] = CO(CO_F3),
	[0x91 ... 0x97] = CO(0), [0x98 ... 0x99] = CO(0), [0x9e ... 0x9f] = CO(0),
	[0xa0 ... 0xa3] = CO(0), [0xa4 ... 0xa7] = CO(0), [0xa8 ... 0xa9] = CO(0),
	[0xaa ... 0xaf] = CO(0), [0xb0 ... 0xbf] = CO(0),
	[0xc0 ... 0xc1] = COG(0, (unsigned char)~CO_R(6)),
	[0xc6 ... 0xc7] = COG(0, CO_R(0)),
	[0xd0 ... 0xd3] = COG(0, (unsigned char)~CO_R(6)),
	[0xf5] = CO(0),
	[0xf6 ... 0xf7] = COG(CO_LOCK, (unsigned char)~CO_R(1)),
	[0xf8 ... 0xf9] = CO(0), [0xfc ... 0xfd] = CO(0),
	[0xfe ... 0xff] = COG(CO_LOCK, CO_R(0) | CO_R(1)),
};

static const struct callopt_op callopt_ops2[256] = {
	[0x1f] = COG(0, CO_R(0)),
	[0x31] = CO(0),
	[0x40 ... 0x4f] = CO(0), [0x90 ... 0x9f] = CO(0),
	[0xa3] = CO(0), [0xa4 ... 0xa5] = CO(0), [0xab] = CO(CO_LOCK),
	[0xac ... 0xad] = CO(0), [0xaf] = CO(0), [0xb0 ... 0xb1] = CO(CO_LOCK),
	[0xb3] = CO(CO_LOCK), [0xb6 ... 0xb7] = CO(0),
	[0xb8] = CO(CO_F3 | CO_F3_ONLY),
	[0xba] = COG(CO_LOCK, CO_R(4) | CO_R(5) | CO_R(6) | CO_R(7)),
	[0xbb] = CO(CO_LOCK), [0xbc ... 0xbd] = CO(CO_F3), [0xbe ... 0xbf] = CO(0),
	[0xc0 ... 0xc1] = CO(CO_LOCK),
	[0xc7] = COG(CO_MEM | CO_LOCK, CO_R(1)),
	[0xc8 ... 0xcf] = CO(CO_NO66),
};

static bool callopt_lockable(const struct callopt_op *op, struct insn *insn, unsigned char reg)
{
	if (!(op->flags & CO_LOCK) || !insn->modrm.nbytes ||
	    X86_MODRM_MOD(insn->modrm.bytes[0]) == 3)
		return false;
	if (insn->opcode.nbytes == 2)
		return insn->opcode.bytes[1] != 0xba || reg != 4;
	switch (insn->opcode.bytes[0]) {
	case 0x80 ... 0x83:
		return reg != 7;
	case 0xf6 ... 0xf7:
		return reg == 2 || reg == 3;
	}
	return true;
}

/*
 * Why callopt_insn_ok() refuses the instruction, or NULL. The %fs/%gs and
 * REP refusals come first, with texts of their own (explain.c's
 * insn_rule() files them under their rules); the rest is the allowlist.
 */
static const char *callopt_refusal(struct insn *insn)
{
	const struct callopt_op *op;
	unsigned char reg = 0;
	insn_byte_t prefix;
	bool f3 = false;
	int i;

	for_each_insn_prefix(insn, i, prefix) {
		if (prefix == 0x64)
			return "%fs operand: callopt refuses %fs and %gs segment overrides";
		if (prefix == 0x65)
			return "%gs operand: the preempt count callopt raises is "
			       "%gs-relative per-CPU data";
		if ((prefix == 0xf2 || prefix == 0xf3) && is_string_insn(insn))
			return "REP string instruction: unbounded time with preemption off";
	}
	if (insn->vex_prefix.nbytes)
		return "VEX/EVEX/XOP instruction (SIMD state): not in callopt's allowlist";
	if (insn_is_rex2(insn))
		return "REX2 (APX) instruction: not in callopt's allowlist";
	if (insn->opcode.nbytes == 1)
		op = &callopt_ops1[insn->opcode.bytes[0]];
	else if (insn->opcode.nbytes == 2 && insn->opcode.bytes[0] == 0x0f)
		op = &callopt_ops2[insn->opcode.bytes[1]];
	else
		return "three-byte opcode: not in callopt's allowlist";
	if (!(op->flags & CO_OK))
		return "opcode not in callopt's allowlist";
	if (insn->modrm.nbytes) {
		reg = X86_MODRM_REG(insn->modrm.bytes[0]);
		if (!(op->regs & CO_R(reg)))
			return "this ModRM.reg of the group is not in callopt's allowlist";
		if ((op->flags & CO_MEM) && X86_MODRM_MOD(insn->modrm.bytes[0]) == 3)
			return "register form not in callopt's allowlist";
	}
	for_each_insn_prefix(insn, i, prefix) {
		switch (prefix) {
		case 0x66:
			if (op->flags & CO_NO66)
				return "66 prefix: its 16-bit form is undefined for this opcode";
			break;
		case 0x26: case 0x2e: case 0x36: case 0x3e:
			break;
		case 0xf0:
			if (!callopt_lockable(op, insn, reg))
				return "LOCK where callopt's allowlist has none";
			break;
		case 0xf3:
			if (!(op->flags & CO_F3))
				return "F3 prefix not in callopt's allowlist for this opcode";
			f3 = true;
			break;
		default:
			return "address-size or F2 prefix: not in callopt's allowlist";
		}
	}
	if ((op->flags & CO_F3_ONLY) && !f3)
		return "opcode not in callopt's allowlist without F3";
	return NULL;
}

/* can_probe(): INT and UD are not probed. */
static bool is_exception_insn(struct insn *insn)
{
	if (insn->opcode.bytes[0] == 0x0f)
		return insn->opcode.bytes[1] == 0xff ||
		       insn->opcode.bytes[1] == 0xb9 ||
		       insn->opcode.bytes[1] == 0x0b;
	return insn->opcode.bytes[0] == 0xcc || insn->opcode.bytes[0] == 0xcd ||
	       insn->opcode.bytes[0] == 0xce || insn->opcode.bytes[0] == 0xf1;
}

/* __copy_instruction() returns 0 for these. */
static const char *copy_refusal(struct insn *insn)
{
	if (insn_has_emulate_prefix(insn))
		return "force-emulate prefix";
	if (insn->opcode.bytes[0] == 0xcc)
		return "int3 placed by another subsystem";
	if (insn->opcode.bytes[0] == 0x17 ||
	    (insn->opcode.bytes[0] == 0x8e && X86_MODRM_REG(insn->modrm.bytes[0]) == 2))
		return "pop ss / mov to ss masks exceptions";
	return NULL;
}

/* prepare_emulation() returns -EOPNOTSUPP for these. */
static const char *emul_refusal(struct insn *insn)
{
	unsigned char op = insn->opcode.bytes[0];
	unsigned char modrm = insn->modrm.bytes[0];

	switch (op) {
	case 0x9a:
	case 0xea:
		return "far call/jmp absolute";
	case 0xcc:
		return "int3";
	case 0xcf:
		return "iret";
	case 0x0f:
		if (insn->opcode.bytes[1] == 0x01 && X86_MODRM_REG(modrm) == 0 &&
		    X86_MODRM_MOD(modrm) == 3)
			return "VM extension instruction";
		return NULL;
	case 0xff:
		switch (X86_MODRM_REG(modrm)) {
		case 3:
		case 5:
			return "far indirect call/jmp";
		case 2:
		case 4:
			if (insn->addr_bytes != 8)
				return "indirect call/jmp with 32-bit address size";
			if (X86_MODRM_MOD(modrm) != 3)
				return "indirect call/jmp through memory";
		}
	}
	return NULL;
}

static bool rel_jump(struct insn *insn)
{
	unsigned char op = insn->opcode.bytes[0];

	if (op == 0x0f)
		return (insn->opcode.bytes[1] & 0xf0) == 0x80;
	return (op >= 0xe0 && op <= 0xe3) || op == 0xe9 || op == 0xeb ||
	       (op & 0xf0) == 0x70;
}

struct mn {
	unsigned char op;
	const char *name;
};

static const struct mn one_byte[] = {
	{ 0x01, "add" }, { 0x03, "add" }, { 0x05, "add" }, { 0x09, "or" },
	{ 0x0b, "or" }, { 0x21, "and" }, { 0x23, "and" }, { 0x25, "and" },
	{ 0x29, "sub" }, { 0x2b, "sub" }, { 0x31, "xor" }, { 0x33, "xor" },
	{ 0x38, "cmp" }, { 0x39, "cmp" }, { 0x3b, "cmp" }, { 0x3c, "cmp" },
	{ 0x3d, "cmp" }, { 0x63, "movslq" }, { 0x68, "push" }, { 0x69, "imul" },
	{ 0x6a, "push" }, { 0x6c, "ins" }, { 0x6d, "ins" }, { 0x6e, "outs" },
	{ 0x6f, "outs" }, { 0x80, "grp1" }, { 0x81, "grp1" }, { 0x83, "grp1" },
	{ 0x84, "test" }, { 0x85, "test" }, { 0x88, "mov" }, { 0x89, "mov" },
	{ 0x8a, "mov" }, { 0x8b, "mov" }, { 0x8d, "lea" }, { 0x90, "nop" },
	{ 0x98, "cltq" }, { 0x99, "cltd" }, { 0x9c, "pushf" }, { 0x9d, "popf" },
	{ 0xa4, "movs" }, { 0xa5, "movs" }, { 0xa6, "cmps" }, { 0xa7, "cmps" },
	{ 0xa8, "test" }, { 0xa9, "test" }, { 0xaa, "stos" }, { 0xab, "stos" },
	{ 0xac, "lods" }, { 0xad, "lods" }, { 0xae, "scas" }, { 0xaf, "scas" },
	{ 0xc1, "shift" }, { 0xc2, "ret" },
	{ 0xc3, "ret" }, { 0xc6, "mov" }, { 0xc7, "mov" }, { 0xc8, "enter" },
	{ 0xc9, "leave" },
	{ 0xcc, "int3" }, { 0xd1, "shift" }, { 0xd3, "shift" }, { 0xe0, "loop" },
	{ 0xe1, "loop" }, { 0xe2, "loop" }, { 0xe3, "jrcxz" }, { 0xe8, "call" },
	{ 0xe9, "jmp" }, { 0xeb, "jmp" }, { 0xf4, "hlt" }, { 0xf6, "grp3" },
	{ 0xf7, "grp3" }, { 0xfa, "cli" }, { 0xfb, "sti" }, { 0xfe, "inc/dec" },
	{ 0xff, "grp5" },
};

static const char *mnemonic(struct insn *insn)
{
	unsigned char op = insn->opcode.bytes[0], op1 = insn->opcode.bytes[1];

	if (op == 0x0f) {
		if (op1 == 0x1e && insn->length == 4 && insn->kaddr[0] == 0xf3)
			return "endbr64";
		if (op1 == 0x1f)
			return "nop";
		if (op1 == 0x0b)
			return "ud2";
		if ((op1 & 0xf0) == 0x80)
			return "jcc";
		if ((op1 & 0xf0) == 0x40)
			return "cmovcc";
		if ((op1 & 0xf0) == 0x90)
			return "setcc";
		if (op1 == 0xb6 || op1 == 0xb7 || op1 == 0xbe || op1 == 0xbf)
			return "movzx/sx";
		return "0f-op";
	}
	if ((op & 0xf0) == 0x70)
		return "jcc";
	if (op >= 0x50 && op <= 0x57)
		return "push";
	if (op >= 0x58 && op <= 0x5f)
		return "pop";
	if (op >= 0xb8 && op <= 0xbf)
		return "mov";
	if (op == 0xff && X86_MODRM_REG(insn->modrm.bytes[0]) == 2)
		return "call*";
	if (op == 0xff && X86_MODRM_REG(insn->modrm.bytes[0]) == 4)
		return "jmp*";
	for (size_t i = 0; i < sizeof(one_byte) / sizeof(one_byte[0]); i++)
		if (one_byte[i].op == op)
			return one_byte[i].name;
	return "?";
}

int kp_decode(const unsigned char *buf, size_t avail, struct kp_insn *ki)
{
	struct insn insn;

	memset(ki, 0, sizeof(*ki));
	if (insn_decode(&insn, buf, avail < MAX_INSN_SIZE ? avail : MAX_INSN_SIZE,
			INSN_MODE_64) < 0)
		return 0;
	ki->len = insn.length;
	ki->mnemonic = mnemonic(&insn);
	ki->exception = is_exception_insn(&insn);
	ki->copy_refusal = copy_refusal(&insn);
	ki->emul_refusal = emul_refusal(&insn);
	ki->boost_refusal = boost_refusal(&insn);
	ki->callopt_refusal = callopt_refusal(&insn);
	ki->rip_relative = insn_rip_relative(&insn);
	if (ki->rip_relative)
		ki->rip_disp = insn.displacement.value;
	ki->indirect_jump = (insn.opcode.bytes[0] == 0xff &&
			     (X86_MODRM_REG(insn.modrm.value) & 6) == 4) ||
			    insn.opcode.bytes[0] == 0xea;
	ki->rel_jump = rel_jump(&insn);
	if (ki->rel_jump)
		ki->rel_target = insn.immediate.value;
	return ki->len;
}
