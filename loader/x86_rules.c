// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The kernel's x86 instruction decoder (compiled in from the kernel tree, as
 * objtool and perf do) and the per-instruction rules of the x86 kprobes
 * code: can_probe()'s exception check, __copy_instruction(),
 * prepare_emulation(), can_boost() and the callopt patch's
 * callopt_insn_ok(). The function-level rules (exception tables, reserved
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

/* callopt_insn_is_string(): MOVS, CMPS, STOS, LODS, SCAS and INS, OUTS */
static bool callopt_insn_is_string(struct insn *insn)
{
	unsigned char op0 = insn->opcode.bytes[0];

	return insn->opcode.nbytes == 1 &&
	       ((op0 >= 0x6c && op0 <= 0x6f) || (op0 >= 0xa4 && op0 <= 0xa7) ||
		(op0 >= 0xaa && op0 <= 0xaf));
}

/*
 * callopt_insn_ok() of the callopt patch (opt.c), in its order: the
 * prefixes first (%fs/%gs overrides; REP/REPNE on a string instruction;
 * LOCK stays allowed), then the opcode.
 */
static const char *callopt_refusal(struct insn *insn)
{
	unsigned char op0 = insn->opcode.bytes[0];
	unsigned char reg = X86_MODRM_REG(insn->modrm.bytes[0]);
	unsigned char mod = X86_MODRM_MOD(insn->modrm.bytes[0]);
	bool rep = false;
	insn_byte_t prefix;
	int i;

	for_each_insn_prefix(insn, i, prefix) {
		if (prefix == 0xf3)
			rep = true;
		switch (prefix) {
		case 0x64:
			return "%fs operand: callopt refuses %fs and %gs segment overrides";
		case 0x65:
			return "%gs operand: the preempt count callopt raises is "
			       "%gs-relative per-CPU data";
		case 0xf2:
		case 0xf3:
			if (callopt_insn_is_string(insn))
				return "REP string instruction: unbounded time with "
				       "preemption off";
			break;
		}
	}

	if (insn->opcode.nbytes == 2 && op0 == 0x0f) {
		switch (insn->opcode.bytes[1]) {
		case 0x00:
			return "system instruction (0f 00: lldt, ltr, ...)";
		case 0x01:
			return "system instruction (0f 01: stac/clac, monitor/mwait, ...)";
		case 0x05:
		case 0x07:
		case 0x34 ... 0x35:
			return "syscall/sysret/sysenter/sysexit";
		case 0x06:
			return "clts";
		case 0x08 ... 0x09:
			return "invd/wbinvd";
		case 0x0b:
		case 0xb9:
		case 0xff:
			return "ud0/ud1/ud2";
		case 0x20 ... 0x23:
			return "move to/from control or debug register";
		case 0x30:
			return "wrmsr";
		case 0x37:
			return "getsec";
		case 0x78 ... 0x79:
			return "vmread/vmwrite";
		case 0xa0 ... 0xa1:
			return "push/pop of the %fs selector";
		case 0xa8 ... 0xa9:
			return "push/pop of the %gs selector";
		case 0xaa:
			return "rsm";
		case 0xb2:
		case 0xb4 ... 0xb5:
			return "lss/lfs/lgs (loads a segment register)";
		case 0xae:
			return rep && mod == 3 ? "rd/wr fs/gs base" : NULL;
		case 0xc7:
			return (reg == 6 || reg == 7) && mod != 3 ?
			       "vmptrld/vmclear/vmxon/vmptrst" : NULL;
		}
		return NULL;
	}
	if (insn->opcode.nbytes != 1)
		return "not a one- or two-byte opcode";
	switch (op0) {
	case 0x6c ... 0x6f:
		return "ins/outs (port I/O)";
	case 0x8e:
		return "move to segment register";
	case 0x9c ... 0x9d:
		return "pushf/popf";
	case 0xc2 ... 0xc3:
	case 0xca ... 0xcf:
		return "ret/retf/int/iret";
	case 0xc6 ... 0xc7:
		return insn->modrm.bytes[0] == 0xf8 ? "xabort/xbegin (a branch)" : NULL;
	case 0xc8:
		return "enter";
	case 0xe4 ... 0xe7:
	case 0xec ... 0xef:
		return "in/out";
	case 0xfa ... 0xfb:
		return "cli/sti";
	case 0xff:
		return reg == 0 || reg == 1 || reg == 6 ? NULL :
		       "Grp5 other than inc/dec/push";
	}
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
