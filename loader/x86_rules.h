/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the x86 kprobes code decides about a single instruction, decoded with
 * the kernel's own instruction decoder (tools/arch/x86/lib/insn.c).
 * Mirrors arch/x86/kernel/kprobes/core.c and opt.c of the kernel kpctl is
 * built against; see x86_rules.c.
 */
#ifndef KPCTL_X86_RULES_H
#define KPCTL_X86_RULES_H

#include <stdbool.h>
#include <stddef.h>

#define KP_MAX_INSN_SIZE	15
#define KP_JMP32_SIZE		5

struct kp_insn {
	int len;			/* 0: the kernel's decoder refuses it */
	const char *mnemonic;		/* coarse name, for display only */
	bool exception;			/* INT/UD: can_probe() refuses */
	const char *copy_refusal;	/* why __copy_instruction() fails */
	const char *emul_refusal;	/* why prepare_emulation() fails */
	const char *boost_refusal;	/* why can_boost() fails, less its
					 * exception-table check
					 */
	const char *callopt_refusal;	/* why callopt_insn_ok() fails */
	bool rel_jump;			/* a jump insn_jump_into_range() checks */
	long long rel_target;		/* its target, relative to the insn's end */
	bool rip_relative;
	long long rip_disp;		/* its displacement, from the insn's end */
	bool indirect_jump;		/* insn_is_indirect_jump() */
};

/* Decodes the instruction at @buf (@avail bytes readable). Returns its length. */
int kp_decode(const unsigned char *buf, size_t avail, struct kp_insn *ki);

#endif /* KPCTL_X86_RULES_H */
