// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_warn: emits one kernel WARNING when loaded. The test suite loads it to
 * prove that scripts/vm/vm-run fails a run whose kernel log shows a splat.
 */
#include <linux/bug.h>
#include <linux/module.h>

static int __init kpx_warn_init(void)
{
	WARN(1, "kpx_warn: deliberate warning for the splat-detection test\n");
	return 0;
}

static void __exit kpx_warn_exit(void)
{
}

module_init(kpx_warn_init);
module_exit(kpx_warn_exit);
MODULE_DESCRIPTION("Emit one WARNING on load (kpx selftest)");
MODULE_LICENSE("GPL");
