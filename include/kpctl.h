/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between kpctl's BPF programs and the loader. */
#ifndef KPCTL_H
#define KPCTL_H

/* One slot per attached probe; the slot is the link's BPF cookie. */
#define KPCTL_MAX_PROBES 4096

struct kpctl_count {
	__u64 hits;
};

#endif /* KPCTL_H */
