# libkpx (this folder, built into build/libkpx.a; its headers are in
# include/) and the build rules that kpctl (loader/), the stress and sweep
# controllers (selftests/stress, selftests/sweep), the detach tools
# (selftests/detach) and kpx-bench (selftests/benchs) share: BPF object ->
# skeleton -> binary linked against libkpx and the libbpf of the patched
# kernel tree.
#
# An including Makefile sets OUT (its object folder under BUILD) and APPS
# (its binaries under BUILD), includes this file, and gives each binary its
# sources and skeletons as prerequisites with $(LINK) as the recipe:
#
#   APPS := kpx-stress
#   OUT = $(BUILD)/stress
#   include ../../bpf/bpf.mk
#   $(BUILD)/kpx-stress: kpx_stress.c $(OUT)/kpx_stress.skel.h $(APP_DEPS)
#   	$(LINK)
#
# Every NAME.bpf.c of the including folder builds into $(OUT)/NAME.skel.h.
KPX_LIB_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
KPX_ROOT := $(abspath $(KPX_LIB_DIR)/..)
BUILD ?= $(KPX_ROOT)/build
CLANG ?= clang-19
LLVM_STRIP ?= llvm-strip-19
KSRC ?= $(BUILD)/linux
LIBBPF := $(BUILD)/libbpf
LIBBPF_A := $(LIBBPF)/lib/libbpf.a
BPFTOOL := $(BUILD)/bpftool
LIBKPX := $(BUILD)/libkpx.a
# UAPI from the patched tree (not the distribution's older linux-libc-dev).
INCLUDES := -I$(OUT) -I. -I$(KPX_ROOT)/include -I$(LIBBPF)/include \
	-I$(KSRC)/tools/include/uapi
CFLAGS ?= -O2 -g -Wall -Wextra -Wno-unused-parameter
LDLIBS := $(LIBKPX) $(LIBBPF_A) -lelf -lz -lpthread -lm
BPF_HDRS := $(wildcard *.h) $(wildcard $(KPX_ROOT)/include/*.h)
APP_DEPS := $(LIBKPX) $(LIBBPF_A) $(wildcard *.h) $(wildcard $(KPX_ROOT)/include/*.h)
# The sources and skeletons of the rule's prerequisites, then the libraries.
LINK = $(CC) $(CFLAGS) $(INCLUDES) $(filter-out %.bpf.c,$(filter %.c %.o,$^)) $(LDLIBS) -o $@

KPX_LIB_SRCS := $(wildcard $(KPX_LIB_DIR)/*.c)

all: $(addprefix $(BUILD)/,$(APPS))

$(OUT):
	mkdir -p $@

$(OUT)/%.bpf.o: %.bpf.c $(BPF_HDRS) $(BUILD)/vmlinux.h | $(OUT)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD) $(INCLUDES) \
		-Wall -Werror -c $< -o $@
	$(LLVM_STRIP) -g $@

$(OUT)/%.skel.h: $(OUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# Built whole in a folder of its own and renamed into place, so that two
# tools' builds running at once cannot mix their objects.
$(LIBKPX): $(KPX_LIB_SRCS) $(wildcard $(KPX_ROOT)/include/*.h)
	@set -e; d=$$(mktemp -d $(BUILD)/.libkpx.XXXXXX); trap 'rm -rf $$d' EXIT; \
	for s in $(KPX_LIB_SRCS); do \
		$(CC) $(CFLAGS) $(INCLUDES) -c $$s -o $$d/$$(basename $$s .c).o; \
	done; \
	ar rcs $$d/libkpx.a $$d/*.o; mv $$d/libkpx.a $@

.PHONY: all
.DELETE_ON_ERROR:
