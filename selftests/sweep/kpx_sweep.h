/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between the sweep's BPF program and its controller. */
#ifndef KPX_SWEEP_H
#define KPX_SWEEP_H

/* Sites per run (the cookie indexes the .bss arrays). */
#define SWEEP_MAX_SITES	65536

/* sweep_read_text (include/kpx_text.h): up to this many bytes of kernel text. */
#define SWEEP_TEXT_MAX	16

#endif /* KPX_SWEEP_H */
