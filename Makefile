# kpx: cheap BPF kprobes on Linux 6.12 x86_64. See README.md.
#
#   make run     install deps, build everything, boot the VM, show the demo
#   make check   the same, then run the whole test suite in the VM
SHELL := /bin/bash
ROOT := $(CURDIR)
BUILD := $(ROOT)/build
KSRC := $(BUILD)/linux
KOBJ := $(BUILD)/kobj
KOBJ_DEBUG := $(BUILD)/kobj-debug
JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))

CLANG ?= clang-19
LLVM_STRIP ?= llvm-strip-19
export CCACHE_DIR ?= $(HOME)/.cache/ccache
export CCACHE_BASEDIR := $(ROOT)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 8G
# LOCALVERSION= keeps setlocalversion from appending "+" for the git tree.
KMAKE = $(MAKE) -C $(KSRC) ARCH=x86_64 CC="ccache gcc" HOSTCC="ccache gcc" LOCALVERSION= -j$(JOBS)

LIBBPF_DIR := $(BUILD)/libbpf
LIBBPF_A := $(LIBBPF_DIR)/lib/libbpf.a
BPFTOOL := $(BUILD)/bpftool
VMLINUX_H := $(BUILD)/vmlinux.h
SELFTEST_BPF := $(BUILD)/selftests-bpf/bpftool_kprobe.bpf.o

.PHONY: all deps kernel kernel-src kernel-debug kernel-export kernel-config \
	tools libbpf bpftool loader stress modules modules-debug run check check-stock check-debug soak clean distclean

all: kernel tools loader stress modules $(BUILD)/sites.env $(BUILD)/callopt-sites.env $(SELFTEST_BPF) \
	$(BUILD)/kpctl.8

# --- dependencies -----------------------------------------------------------
deps:
	@scripts/build/deps

# --- kernel -----------------------------------------------------------------
kernel-src: deps
	@scripts/build/kernel-src

kernel-config: kernel-src
	@scripts/build/kernel-config $(KSRC) $(KOBJ) kernel/configs/vm.config

kernel: kernel-config
	@echo "kernel: building in $(KOBJ)"
	@scripts/build/kbuild-stamp check $(KSRC) $(KOBJ) kernel all || { \
		scripts/build/kbuild-stamp begin $(KSRC) $(KOBJ) kernel all && \
		flock $(BUILD)/.kbuild.lock scripts/build/kbuild-progress kernel $(BUILD)/kbuild.log -- \
		$(KMAKE) O=$(KOBJ) all && scripts/build/kbuild-stamp end $(KSRC) $(KOBJ); } || \
		{ tail -40 $(BUILD)/kbuild.log; echo "kernel: build failed, see build/kbuild.log"; exit 1; }
	@scripts/build/update-file $(KOBJ)/arch/x86/boot/bzImage $(BUILD)/bzImage
	@scripts/build/update-file $(KOBJ)/vmlinux $(BUILD)/vmlinux
	@echo "kernel: $(BUILD)/bzImage ($$(cat $(KOBJ)/include/config/kernel.release))"

kernel-debug: kernel-src
	@scripts/build/kernel-config $(KSRC) $(KOBJ_DEBUG) kernel/configs/vm.config kernel/configs/debug.config
	@echo "kernel-debug: building in $(KOBJ_DEBUG)"
	@scripts/build/kbuild-stamp check $(KSRC) $(KOBJ_DEBUG) kernel-debug all || { \
		scripts/build/kbuild-stamp begin $(KSRC) $(KOBJ_DEBUG) kernel-debug all && \
		flock $(BUILD)/.kbuild.lock scripts/build/kbuild-progress kernel-debug $(BUILD)/kbuild-debug.log -- \
		$(KMAKE) O=$(KOBJ_DEBUG) all && scripts/build/kbuild-stamp end $(KSRC) $(KOBJ_DEBUG); } || \
		{ tail -40 $(BUILD)/kbuild-debug.log; echo "kernel-debug: build failed, see build/kbuild-debug.log"; exit 1; }
	@scripts/build/update-file $(KOBJ_DEBUG)/arch/x86/boot/bzImage $(BUILD)/bzImage-debug
	@scripts/build/update-file $(KOBJ_DEBUG)/vmlinux $(BUILD)/vmlinux-debug

kernel-export:
	@scripts/build/kernel-export

# The unpatched kernel, same source and config (build/bzImage-stock; for
# the host tests test_stock_*: make check-stock). It needs the patched
# source tree only for its "pristine" tag, not our kernel. Its sites
# (build/sites-stock.env, for make bench and make rsb-model) are picked
# with our kpctl, so they are a target of their own: make sites-stock.
.PHONY: kernel-stock sites-stock
kernel-stock: deps kernel-src
	@scripts/build/kernel-stock

sites-stock: kernel-stock loader
	@scripts/build/kernel-stock --sites

# --- libbpf, bpftool, vmlinux.h from the patched tree -------------------------
tools: libbpf bpftool $(VMLINUX_H)

libbpf: kernel-src
	@mkdir -p $(LIBBPF_DIR)/obj
	@$(MAKE) -s -C $(KSRC)/tools/lib/bpf BUILD_STATIC_ONLY=1 CC="ccache gcc" \
		OUTPUT=$(LIBBPF_DIR)/obj/ DESTDIR=$(LIBBPF_DIR) prefix= \
		libdir_relative=lib install_headers install_lib >/dev/null

bpftool: kernel-src
	@mkdir -p $(BUILD)/bpftool-obj
	@$(MAKE) -s -C $(KSRC)/tools/bpf/bpftool OUTPUT=$(BUILD)/bpftool-obj/ \
		CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP) CC="ccache gcc" \
		> $(BUILD)/bpftool-build.log 2>&1 || \
		{ tail -30 $(BUILD)/bpftool-build.log; exit 1; }
	@scripts/build/update-file $(BUILD)/bpftool-obj/bpftool $(BPFTOOL)

$(VMLINUX_H): $(BUILD)/vmlinux | bpftool
	@$(BPFTOOL) btf dump file $< format c > $@.tmp
	@scripts/build/update-file $@.tmp $@ && rm -f $@.tmp

$(BUILD)/vmlinux: kernel

# Sites are picked by kpctl explain --offline (scripts/sites/explain.py):
# again when kpctl changed, which make loader (order-only: phony) relinks
# first.
SITES_DEPS := scripts/sites/explain.py $(BUILD)/kpctl | loader

$(BUILD)/kpctl: ;

$(BUILD)/sites.env: $(BUILD)/vmlinux scripts/sites/gen-sites $(SITES_DEPS)
	@scripts/sites/gen-sites $< > $@.tmp
	@scripts/build/update-file $@.tmp $@ && rm -f $@.tmp

# Sites of the classes callopt must refuse (selftests/vm/test_callopt_refused).
$(BUILD)/callopt-sites.env: $(BUILD)/vmlinux scripts/sites/callopt-sites $(SITES_DEPS)
	@scripts/sites/callopt-sites $< > $@.tmp
	@scripts/build/update-file $@.tmp $@ && rm -f $@.tmp

$(BUILD)/callopt-sites-debug.env: $(BUILD)/vmlinux-debug scripts/sites/callopt-sites $(SITES_DEPS)
	@scripts/sites/callopt-sites $< > $@.tmp
	@scripts/build/update-file $@.tmp $@ && rm -f $@.tmp

$(BUILD)/vmlinux-debug: kernel-debug

$(BUILD)/sites-debug.env: $(BUILD)/vmlinux-debug scripts/sites/gen-sites $(SITES_DEPS)
	@scripts/sites/gen-sites $< > $@.tmp
	@scripts/build/update-file $@.tmp $@ && rm -f $@.tmp

# --- BPF programs, loader, test modules --------------------------------------
loader: tools
	@$(MAKE) -s -C loader BUILD=$(BUILD) CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP)

# kpctl(8) from loader/Documentation/kpctl.rst (rst2man); man -l build/kpctl.8.
# The completion is loader/bash-completion/kpctl. scripts/check/kpctl-doc check
# (host/test_kpctl_doc) keeps both in step with kpctl's help.
.PHONY: man
man: $(BUILD)/kpctl.8
$(BUILD)/kpctl.8: loader/Documentation/kpctl.rst scripts/check/kpctl-doc | deps
	@scripts/check/kpctl-doc man -o $@ $<

stress: tools
	@$(MAKE) -s -C selftests/stress BUILD=$(BUILD) CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP)

# BPF objects that selftests load with bpftool (selftests/bpf/).
$(BUILD)/selftests-bpf/%.bpf.o: selftests/bpf/%.bpf.c $(VMLINUX_H) | libbpf
	@mkdir -p $(@D)
	@$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD) \
		-I$(LIBBPF_DIR)/include -Wall -Werror -c $< -o $@

# Test modules are built from a copy under build/ so that the checkout stays
# clean (6.12's kbuild writes external module objects beside the sources),
# one copy per kernel flavour.
define build_modules # $(1): kernel object tree, $(2): module folder
	@mkdir -p $(2)
	@rsync -a --checksum selftests/modules/ $(2)/
	@# Module BTF is split against vmlinux's: relink when vmlinux changed.
	@find $(2) -name '*.ko' ! -newer $(1)/vmlinux -delete
	@$(MAKE) -C $(KSRC) O=$(1) M=$(2) CC="ccache gcc" modules \
		> $(2).log 2>&1 || { cat $(2).log; exit 1; }
	@scripts/sites/gen-module-sites $(2) > $(2)/sites.env.tmp
	@scripts/build/update-file $(2)/sites.env.tmp $(2)/sites.env
endef

modules: kernel
	$(call build_modules,$(KOBJ),$(BUILD)/modules)

modules-debug: kernel-debug
	$(call build_modules,$(KOBJ_DEBUG),$(BUILD)/modules-debug)

# --- the two commands of the README -------------------------------------------
run: all
	@scripts/vm/vm-run --smp 2 -- scripts/vm/demo

# Tests only consume what these targets built (a missing artifact fails
# the test, naming the target). The host tests named test_stock_* need the
# unpatched kernel: they run in check-stock, which builds it first, not in
# check (a kernel build of its own; docs/foundation.md, "The stock kernel", has its times).
# The suite: the in-VM tests in two VMs at once, then the host tests
# (selftests/check). Stock comparisons (check-stock), upstream's suites
# (check-upstream), the configuration matrix (check-configs) and the full
# sweep (sweep) have targets of their own.
check: all bench-tool detach-tool rsb-plugin
	@selftests/check -x test_stock_,test_ftracetest_

# Upstream's kprobe-related suites on the stock kernel and on ours, compared
# per test (scripts/check/check-upstream): test_progs (selftests/upstream/tests,
# with the series' own kprobe_mechanism), ftracetest's kprobe and dynevent
# directories, the kprobes KUnit suite. Two kernels with the BPF selftests'
# config, two test_progs builds, two VM boots: long, so not part of make
# check. The summary goes to build/upstream/summary.md and docs/upstream.md.
# STEPS=... runs some steps only (see the script).
.PHONY: check-upstream
check-upstream: kernel-src
	@scripts/check/check-upstream $(STEPS)

# The negative control of vm/test_detach_race: the VM kernel at the patch
# before the detach fix, one boot per attach path; every row must fail
# there (scripts/check/detach-negative).
.PHONY: detach-negative
detach-negative: kernel-src detach-tool
	@scripts/check/detach-negative

# A test_progs with only TESTS (prog_tests names), against build/kobj, run
# in one VM boot: a quick check of the series' own tests, not a
# replacement for check-upstream (scripts/check/tp-subset).
.PHONY: tp-subset
tp-subset: all
	@scripts/check/tp-subset $(if $(TP_PROGS),--progs "$(TP_PROGS)") $(TESTS)

check-stock: all sites-stock bench-tool
	@selftests/run -k test_stock_

check-debug: all kernel-debug modules-debug $(BUILD)/sites-debug.env $(BUILD)/callopt-sites-debug.env
	@KPX_FLAVOUR=debug selftests/run -x test_stock_

# The configuration matrix of the kernel series (scripts/check/check-configs):
# normal, debug, PREEMPT_DYNAMIC booted none/voluntary/full, no
# PREEMPT_COUNT, i386 and arm64 compile checks, a build after each patch.
# Several kernel builds and VM boots; results in build/check-configs/
# (one row per step, kept across runs) and in docs/configs.md, which gets
# the table even when a step failed. CONFIGS=STEP... runs some steps only.
# CONFIG_TESTS=NAME,... runs only those in-VM tests, for a change that only
# they exercise: a table of its own (build/check-configs/tests-NAME-...,
# and the check-configs-tests block of docs/configs.md).
comma := ,
CONFIG_TESTS_DIR = $(BUILD)/check-configs/tests-$(subst $(comma),-,$(CONFIG_TESTS))
.PHONY: check-configs
# Does the series apply to, and build on, the newest linux-source-6.12 that
# Debian offers? The pin (kernel/source-version) does not move: that stays a
# deliberate commit. One line in build/source-check/result.md.
.PHONY: check-source
check-source:
	@scripts/check/check-source

# The series split by tree, in postable form (issue 34, item 10): one
# directory per sub-series of kernel/split under build/series/, git
# format-patch with a cover letter, To:/Cc: from get_maintainer.pl, and
# checkpatch --strict counts (scripts/build/series). It fails while a
# patch meant for posting is in no sub-series; PARTIAL=1 lists those and
# goes on. series-build also builds each sub-series after each patch (the
# VM config; a kernel build per patch).
.PHONY: series series-build
series: kernel-src
	@scripts/build/series $(if $(PARTIAL),--partial)

series-build: kernel-src
	@scripts/build/series --build $(if $(PARTIAL),--partial) $(if $(SUBSERIES),--only $(SUBSERIES))

# Debian packages of the series built from Debian's amd64 config, the
# debian-amd64 row's kernel (scripts/build/deb): build/deb/*.deb, to
# install on a real machine (docs/hardware.md). Builds all of Debian's
# modules: hours on 2 cores the first time.
.PHONY: deb
deb: kernel-src
	@scripts/build/deb

# The packages as a user meets them: unpacked (dpkg -x), the kernel booted
# in a VM, one of its modules loaded from the package, probes attached
# (scripts/check/check-deb).
.PHONY: check-deb
check-deb: all
	@scripts/check/check-deb

check-configs: all bench-tool detach-tool
	@rc=0; scripts/check/check-configs $(if $(CONFIG_TESTS),--tests $(CONFIG_TESTS)) $(CONFIGS) || rc=$$?; \
		$(if $(CONFIG_TESTS), \
		scripts/build/update-doc-block docs/configs.md check-configs-tests $(CONFIG_TESTS_DIR)/results.md;, \
		scripts/build/update-doc-block docs/configs.md check-configs $(BUILD)/check-configs/results.md;) \
		exit $$rc

# The stress test alone, longer (SOAK_MINUTES, default 30), with a summary.
soak: all
	@scripts/vm/vm-run --smp 4 --mem 2048 --timeout $$(( $${SOAK_MINUTES:-30} * 60 + 600 )) -- \
		selftests/soak $${SOAK_MINUTES:-30}

# build/kpx-detach-race (selftests/detach/): a BPF kprobe program detached
# and closed while it runs on another CPU (vm/test_detach_race).
.PHONY: detach-tool
detach-tool: tools
	@$(MAKE) -s -C selftests/detach BUILD=$(BUILD) CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP)

# --- benchmarks (docs/benchmarks.md) -------------------------------------------
.PHONY: bench bench-tool
# build/kpx-bench, the in-VM half (selftests/benchs/: bench.c, bench.bpf.c).
bench-tool: tools
	@$(MAKE) -s -C selftests/benchs BUILD=$(BUILD) CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP)

# The stock kernel (build/bzImage-stock) and ours, one VM boot per kernel
# and measurement mode; prints the table, writes JSON and a chart under
# build/bench/ (the time of the measuring step: the "Host time" note in docs/benchmarks.md).
# BENCH_ARGS go to selftests/benchs/bench (--update-docs: docs/benchmarks.md).
bench: all bench-tool sites-stock
	@selftests/benchs/bench $(BENCH_ARGS)

# The return stack model (docs/benchmarks.md, "Return stack model"): the
# QEMU TCG plugin build/rsb/rsb_model.so (selftests/benchs/rsb/) and its
# runner, one --icount boot per kernel (ours, and stock when
# build/bzImage-stock exists; build/kpx-bench must exist: make bench-tool).
# RSB_ARGS go to selftests/benchs/rsb-model (--kernels, --configs,
# --ceiling CFG=TOTAL/ABOVE); results in build/rsb/. The runner builds the
# plugin itself; make check builds it (rsb-plugin) for host/test_rsb_model's
# model_check.
.PHONY: rsb-plugin rsb-model
rsb-plugin:
	@$(MAKE) -s -C selftests/benchs/rsb BUILD=$(BUILD)
rsb-model:
	@selftests/benchs/rsb-model $(RSB_ARGS)

# --- install (as bpftool's: PREFIX, DESTDIR) ---------------------------------
# kpctl, its man page and its bash completion, from what make built (make
# install does not build: run make first). make uninstall removes exactly
# those files, and the folders install made that are left empty.
# host/test_install installs into a scratch DESTDIR, runs the installed
# kpctl, uninstalls and finds nothing left.
PREFIX ?= /usr/local
INSTALL ?= install
INSTALL_FILES := sbin/kpctl share/man/man8/kpctl.8 share/bash-completion/completions/kpctl
.PHONY: install uninstall
install:
	@for f in $(BUILD)/kpctl $(BUILD)/kpctl.8; do \
		[ -f $$f ] || { echo "install: no $$f: run make (or make loader man) first" >&2; exit 1; }; \
	done
	$(INSTALL) -D -m 0755 $(BUILD)/kpctl $(DESTDIR)$(PREFIX)/sbin/kpctl
	$(INSTALL) -D -m 0644 $(BUILD)/kpctl.8 $(DESTDIR)$(PREFIX)/share/man/man8/kpctl.8
	$(INSTALL) -D -m 0644 loader/bash-completion/kpctl \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/kpctl
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALL_FILES))
	@for d in sbin share/man/man8 share/man share/bash-completion/completions \
		share/bash-completion share; do \
		rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/$$d 2>/dev/null || true; \
	done

clean:
	rm -rf $(BUILD)/kobj $(BUILD)/kobj-debug $(BUILD)/loader $(BUILD)/modules \
		$(BUILD)/libbpf $(BUILD)/bpftool-obj $(BUILD)/vm $(BUILD)/selftests-bpf \
		$(BUILD)/libkpx.a $(BUILD)/bench-obj $(BUILD)/kpctl.8 $(BUILD)/detach
distclean:
	rm -rf $(BUILD)

# --- every-site sweep (selftests/sweep, scripts/check/sweep, docs/stress.md) -------
# None of these builds a kernel: they use the images and vmlinux files that
# are there (build/bzImage and build/vmlinux, -debug, -stock) and the libbpf,
# bpftool and vmlinux.h of make tools. SWEEP_ARGS go to scripts/check/sweep.
.PHONY: sweep-tool sweep-sample sweep-sample-debug sweep sweep-debug sweep-stock sweep-multi
SWEEP_SAMPLE := $(BUILD)/sweep-sample.tsv
SWEEP_SAMPLE_DEBUG := $(BUILD)/sweep-sample-debug.tsv

# build/kpx-sweep (the in-VM controller and workload).
sweep-tool:
	@$(MAKE) -s -C selftests/sweep BUILD=$(BUILD) CLANG=$(CLANG) LLVM_STRIP=$(LLVM_STRIP)

# What vm/test_sweep_sample consumes: the tool and the sample site list of
# the built kernel (made again only when vmlinux's build ID changed).
sweep-sample: sweep-tool
	@scripts/sites/sweep-sites --mode sample --if-newer --vmlinux $(BUILD)/vmlinux --out $(SWEEP_SAMPLE)

sweep-sample-debug: sweep-tool
	@scripts/sites/sweep-sites --mode sample --if-newer --vmlinux $(BUILD)/vmlinux-debug \
		--out $(SWEEP_SAMPLE_DEBUG)

check: sweep-sample
check-debug: sweep-sample-debug

# The whole set (over 20,000 sites) on our kernel, the debug flavour and the
# stock kernel; results and tables in build/sweep/FLAVOUR/ (summary.md,
# coverage.md). sweep-debug and sweep-stock compare with make sweep's run.
sweep: sweep-tool
	@scripts/check/sweep --flavour normal $(SWEEP_ARGS)

# The same set through kprobe_multi links with offsets (kpx-sweep --multi:
# one link per batch, split while the kernel refuses one), in
# build/sweep/multi; compare with make sweep's run (--compare).
sweep-multi: sweep-tool
	@scripts/check/sweep --flavour normal --out $(BUILD)/sweep/multi $(SWEEP_ARGS) -- --multi

sweep-debug: sweep-tool
	@scripts/check/sweep --flavour debug --compare $(BUILD)/sweep/normal $(SWEEP_ARGS)

# Stock's attaches wait on RCU-tasks grace periods (about 100 s a batch
# here, three hours in one boot), so its sweep runs in SWEEP_STOCK_PARTS
# slices side by side, one host core each (scripts/check/sweep --part), which
# scripts/check/sweep-merge makes one sweep of. --update-docs in SWEEP_ARGS goes
# to the report of the merged sweep only. Stock 6.12 dies at its own bugs
# (docs/stress.md), so stock's report is not what passes or fails: the
# target fails when the normal sweep is not clean or when a site that stock
# survives failed on ours (the report's compare.worse, which must be 0).
SWEEP_STOCK_PARTS ?= 2
SWEEP_STOCK_LIST := $(BUILD)/sweep/stock-sites.tsv
sweep-stock: sweep-tool
	@n=$(SWEEP_STOCK_PARTS); d=$(BUILD)/sweep; parts=; \
	mkdir -p $$d && scripts/sites/sweep-sites --mode full --if-newer \
		--vmlinux $(BUILD)/vmlinux-stock --out $(SWEEP_STOCK_LIST) || exit 2; \
	for k in $$(seq $$n); do \
		parts="$$parts $$d/stock-part$${k}of$$n"; \
		echo "sweep-stock: part $$k/$$n, log in $$d/stock-part$${k}of$$n.log"; \
		scripts/check/sweep --flavour stock --sites $(SWEEP_STOCK_LIST) --part $$k/$$n \
			$(filter-out --update-docs,$(SWEEP_ARGS)) > $$d/stock-part$${k}of$$n.log 2>&1 & \
	done; wait; \
	rm -rf $$d/stock && scripts/check/sweep-merge $$d/stock $$parts || exit 1; \
	scripts/check/sweep-report $$d/stock --compare $$d/normal $(filter --update-docs,$(SWEEP_ARGS)); \
	$(MAKE) -s sweep-stock-compare

# The pass/fail of sweep-stock, on sweeps already taken.
SWEEP_NORMAL ?= $(BUILD)/sweep/normal
SWEEP_STOCK ?= $(BUILD)/sweep/stock
.PHONY: sweep-stock-compare
sweep-stock-compare:
	@scripts/check/sweep-report $(SWEEP_NORMAL) --compare $(SWEEP_STOCK) --quiet || \
		{ echo "sweep-stock: the normal sweep is not clean" >&2; exit 1; }; \
	w=$$(jq -r '.compare.worse | numbers' $(SWEEP_NORMAL)/summary.json); \
	[ -n "$$w" ] || { echo "sweep-stock: no comparison in $(SWEEP_NORMAL)/summary.json" >&2; exit 1; }; \
	[ "$$w" = 0 ] || { echo "sweep-stock: $$w sites that stock survives failed on ours" \
		"(scripts/check/sweep-report $(SWEEP_NORMAL) --compare $(SWEEP_STOCK))" >&2; exit 1; }; \
	echo "sweep-stock: no site that stock survives fails on ours"
