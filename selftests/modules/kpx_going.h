/* SPDX-License-Identifier: GPL-2.0 */
/* kpx_going and kpx_going_helper: see kpx_going_helper.c. */
#ifndef KPX_GOING_H
#define KPX_GOING_H

#include <linux/module.h>

/* What kpx_going_site() returns: the immediate of the probed movabs. */
#define KPX_GOING_MAGIC	0x6b70785f676f6e65UL

int kpx_going_attach(unsigned long (*fn)(unsigned long), void *site,
		     struct module *mod);

#endif
