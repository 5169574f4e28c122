// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reads what 'explain' needs about one kernel function: its text from the
 * running kernel (and from vmlinux, to compare), the entries of the kernel's
 * tables that fall into it (exception table, BUG table, jump labels, static
 * calls, SMP lock prefixes, alternatives, ftrace sites), the ORC unwind
 * data at each of its offsets, the kprobes blacklist and the kprobes
 * already registered there.
 *
 * Table entries use the kernel's relative encoding: a 32-bit field holds
 * target - (address of the field).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "common.h"
#include "kimage.h"
#include "x86_rules.h"

#define NT_GNU_BUILD_ID_TYPE 3

static const Elf64_Shdr *shdr(const struct vmlinux *vm, int i)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)vm->map;

	return (const Elf64_Shdr *)(vm->map + eh->e_shoff + (size_t)i * eh->e_shentsize);
}

static int nsections(const struct vmlinux *vm)
{
	return ((const Elf64_Ehdr *)vm->map)->e_shnum;
}

static const char *section_name(const struct vmlinux *vm, const Elf64_Shdr *sh)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)vm->map;

	return (const char *)vm->map + shdr(vm, eh->e_shstrndx)->sh_offset + sh->sh_name;
}

/* The section holding link address @va .. @va + @len, or NULL. */
static const Elf64_Shdr *section_at(const struct vmlinux *vm, unsigned long long va,
				    size_t len)
{
	for (int i = 1; i < nsections(vm); i++) {
		const Elf64_Shdr *sh = shdr(vm, i);

		if (sh->sh_type != SHT_PROGBITS || !(sh->sh_flags & SHF_ALLOC))
			continue;
		if (va >= sh->sh_addr && va + len <= sh->sh_addr + sh->sh_size &&
		    sh->sh_offset + sh->sh_size <= vm->len)
			return sh;
	}
	return NULL;
}

static const unsigned char *image_at(const struct vmlinux *vm, unsigned long long va,
				     size_t len)
{
	const Elf64_Shdr *sh = section_at(vm, va, len);

	return sh ? vm->map + sh->sh_offset + (va - sh->sh_addr) : NULL;
}

static int vm_sym_cmp(const void *a, const void *b)
{
	const struct vm_sym *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->value < y->value ? -1 : x->value > y->value;
}

/* Calls @fn for each named symbol of vmlinux's symbol tables; stops at a nonzero return. */
static int for_each_elf_sym(const struct vmlinux *vm,
			    int (*fn)(const Elf64_Sym *sym, const char *name, void *arg), void *arg)
{
	for (int i = 1; i < nsections(vm); i++) {
		const Elf64_Shdr *sh = shdr(vm, i), *strs;
		const Elf64_Sym *sym;
		size_t n;
		int err;

		if (sh->sh_type != SHT_SYMTAB)
			continue;
		strs = shdr(vm, sh->sh_link);
		sym = (const Elf64_Sym *)(vm->map + sh->sh_offset);
		n = sh->sh_size / sizeof(*sym);
		for (size_t k = 0; k < n; k++) {
			if (!sym[k].st_name)
				continue;
			err = fn(&sym[k], (const char *)vm->map + strs->sh_offset + sym[k].st_name,
				 arg);
			if (err)
				return err;
		}
	}
	return 0;
}

static int vm_sym_add(const Elf64_Sym *sym, const char *name, void *arg)
{
	struct vmlinux *vm = arg;

	if (vm->nsyms == vm->syms_cap) {
		size_t cap = vm->syms_cap ? 2 * vm->syms_cap : 65536;
		struct vm_sym *v = realloc(vm->syms, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		vm->syms = v;
		vm->syms_cap = cap;
	}
	vm->syms[vm->nsyms].name = name;
	vm->syms[vm->nsyms++].value = sym->st_value;
	return 0;
}

/* Sorts vmlinux's named symbols by name, once (vm->syms). */
static void vm_syms_build(struct vmlinux *vm)
{
	for_each_elf_sym(vm, vm_sym_add, vm);
	if (vm->syms)
		qsort(vm->syms, vm->nsyms, sizeof(*vm->syms), vm_sym_cmp);
}

/*
 * The value of symbol @name in vmlinux's symbol table (0 if absent); with
 * @want, the first symbol of that name at @want, if any.
 */
static unsigned long long elf_sym_at(const struct vmlinux *cvm, const char *name,
				     unsigned long long want)
{
	struct vmlinux *vm = (struct vmlinux *)cvm;	/* the cache only */
	size_t lo = 0, hi;

	if (!vm->syms)
		vm_syms_build(vm);
	hi = vm->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(vm->syms[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < vm->nsyms && !strcmp(vm->syms[lo].name, name); lo++)
		if (!want || vm->syms[lo].value == want)
			return vm->syms[lo].value;
	return 0;
}

static unsigned long long elf_sym(const struct vmlinux *vm, const char *name)
{
	return elf_sym_at(vm, name, 0);
}

/* The GNU build ID in a buffer of ELF notes; returns its length or 0. */
static size_t find_build_id(const unsigned char *p, size_t len, unsigned char *id)
{
	size_t off = 0;

	while (off + sizeof(Elf64_Nhdr) <= len) {
		const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(p + off);
		size_t name = off + sizeof(*nh), desc = name + ((nh->n_namesz + 3) & ~3U);

		if (desc + nh->n_descsz > len)
			break;
		if (nh->n_type == NT_GNU_BUILD_ID_TYPE && nh->n_namesz == 4 &&
		    !memcmp(p + name, "GNU", 4) && nh->n_descsz <= 64) {
			memcpy(id, p + desc, nh->n_descsz);
			return nh->n_descsz;
		}
		off = desc + ((nh->n_descsz + 3) & ~3U);
	}
	return 0;
}

static int check_build_id(const struct vmlinux *vm)
{
	unsigned char kid[64], vid[64], buf[4096];
	size_t klen = 0, vlen = 0, n;
	FILE *f = fopen("/sys/kernel/notes", "r");

	if (f) {
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		klen = find_build_id(buf, n, kid);
	}
	for (int i = 1; i < nsections(vm) && !vlen; i++) {
		const Elf64_Shdr *sh = shdr(vm, i);

		if (sh->sh_type == SHT_NOTE)
			vlen = find_build_id(vm->map + sh->sh_offset, sh->sh_size, vid);
	}
	if (!klen || !vlen)
		return -1;
	return klen == vlen && !memcmp(kid, vid, klen);
}

/* The section named @name, or NULL. */
static const Elf64_Shdr *section_named(const struct vmlinux *vm, const char *name)
{
	for (int i = 1; i < nsections(vm); i++) {
		const Elf64_Shdr *sh = shdr(vm, i);

		if (sh->sh_type == SHT_PROGBITS && sh->sh_offset + sh->sh_size <= vm->len &&
		    !strcmp(section_name(vm, sh), name))
			return sh;
	}
	return NULL;
}

#define ORC_ENTRY_SIZE		6	/* sizeof(struct orc_entry), packed */
#define ORC_TYPE_UNDEFINED	0

/* Link address of ORC entry @i of the file (orc_ip(): relative to itself). */
static unsigned long long orc_ip_raw(const struct vmlinux *vm, size_t i)
{
	int32_t v;

	memcpy(&v, vm->orc_ip + i * 4, sizeof(v));
	return vm->orc_ip_va + i * 4 + (long long)v;
}

static struct kp_orc orc_decode(const unsigned char *p)
{
	struct kp_orc o = { .found = true };
	int16_t sp, bp;
	uint16_t bits;

	memcpy(&sp, p, 2);
	memcpy(&bp, p + 2, 2);
	memcpy(&bits, p + 4, 2);
	o.sp_offset = sp;
	o.bp_offset = bp;
	/* Little-endian bitfields: sp_reg:4, bp_reg:4, type:3, signal:1 */
	o.sp_reg = bits & 0xf;
	o.bp_reg = (bits >> 4) & 0xf;
	o.type = (bits >> 8) & 0x7;
	o.signal = (bits >> 11) & 0x1;
	return o;
}

static unsigned int orc_type_raw(const struct vmlinux *vm, size_t i)
{
	return orc_decode(vm->orc + i * ORC_ENTRY_SIZE).type;
}

static const struct vmlinux *orc_sort_vm;

/*
 * scripts/sorttable.c's orc_sort_cmp(): by address, and at one address the
 * "weak" section terminators (type undefined) first, so that the lookup's
 * rightmost match is a real entry. Ties beyond that keep the file's order.
 */
static int orc_sort_cmp(const void *pa, const void *pb)
{
	unsigned int a = *(const unsigned int *)pa, b = *(const unsigned int *)pb;
	unsigned long long va = orc_ip_raw(orc_sort_vm, a), vb = orc_ip_raw(orc_sort_vm, b);
	bool ua, ub;

	if (va != vb)
		return va < vb ? -1 : 1;
	ua = orc_type_raw(orc_sort_vm, a) == ORC_TYPE_UNDEFINED;
	ub = orc_type_raw(orc_sort_vm, b) == ORC_TYPE_UNDEFINED;
	if (ua != ub)
		return ua ? -1 : 1;
	return a < b ? -1 : a > b;
}

/*
 * The ORC tables: .orc_unwind_ip (s32, each relative to its own address)
 * and .orc_unwind (struct orc_entry), as many of each. sorttable sorts them
 * at build time (CONFIG_BUILDTIME_TABLE_SORT, which the ORC unwinder
 * selects), and the kernel's lookup relies on it; when they are not sorted
 * kpctl sorts an index of them the way sorttable does.
 */
static void load_orc(struct vmlinux *vm)
{
	const Elf64_Shdr *ip = section_named(vm, ".orc_unwind_ip");
	const Elf64_Shdr *u = section_named(vm, ".orc_unwind");
	size_t n;

	if (!ip || !u || ip->sh_size % 4 || u->sh_size % ORC_ENTRY_SIZE ||
	    ip->sh_size / 4 != u->sh_size / ORC_ENTRY_SIZE || !ip->sh_size)
		return;
	n = ip->sh_size / 4;
	vm->orc_ip = vm->map + ip->sh_offset;
	vm->orc = vm->map + u->sh_offset;
	vm->orc_ip_va = ip->sh_addr;
	vm->norc = n;
	vm->stext = elf_sym(vm, "_stext");
	vm->etext = elf_sym(vm, "_etext");
	for (size_t i = 1; i < n; i++) {
		unsigned long long prev = orc_ip_raw(vm, i - 1), cur = orc_ip_raw(vm, i);

		if (cur > prev || (cur == prev &&
		    (orc_type_raw(vm, i - 1) == ORC_TYPE_UNDEFINED ||
		     orc_type_raw(vm, i) != ORC_TYPE_UNDEFINED)))
			continue;
		vm->orc_order = malloc(n * sizeof(*vm->orc_order));
		if (!vm->orc_order) {
			vm->norc = 0;
			return;
		}
		for (size_t k = 0; k < n; k++)
			vm->orc_order[k] = k;
		orc_sort_vm = vm;
		qsort(vm->orc_order, n, sizeof(*vm->orc_order), orc_sort_cmp);
		orc_sort_vm = NULL;
		return;
	}
}

static size_t orc_index(const struct vmlinux *vm, size_t k)
{
	return vm->orc_order ? vm->orc_order[k] : k;
}

struct kp_orc vmlinux_orc_find(const struct vmlinux *vm, unsigned long long a)
{
	struct kp_orc none = { .found = false };
	unsigned long long ip = a - vm->delta;
	size_t first = 0, last, found = 0;

	/*
	 * The fast lookup of orc_find() covers [_stext, _etext); init text,
	 * modules and ftrace trampolines are looked up elsewhere, and explain
	 * does not predict for those.
	 */
	if (!vm->norc || !vm->stext || ip < vm->stext || ip >= vm->etext)
		return none;
	/* __orc_find(): the rightmost entry whose address is <= ip */
	last = vm->norc;
	while (first < last) {
		size_t mid = first + (last - first) / 2;

		if (orc_ip_raw(vm, orc_index(vm, mid)) <= ip) {
			found = mid;
			first = mid + 1;
		} else {
			last = mid;
		}
	}
	return orc_decode(vm->orc + orc_index(vm, found) * ORC_ENTRY_SIZE);
}

bool kp_orc_same(const struct kp_orc *a, const struct kp_orc *b)
{
	return a->found && b->found &&
	       a->sp_offset == b->sp_offset && a->bp_offset == b->bp_offset &&
	       a->sp_reg == b->sp_reg && a->bp_reg == b->bp_reg &&
	       a->type == b->type && a->signal == b->signal;
}

static const char *orc_reg_name(unsigned int reg)
{
	static const char *const names[] = {
		[1] = "prevsp", [2] = "dx", [3] = "di", [4] = "bp", [5] = "sp",
		[6] = "r10", [7] = "r13", [8] = "bp(ind)", [9] = "sp(ind)",
	};

	return reg < sizeof(names) / sizeof(names[0]) && names[reg] ? names[reg] : "?";
}

static void orc_format_reg(char *buf, size_t len, unsigned int reg, int off)
{
	if (reg == 8)			/* ORC_REG_BP_INDIRECT */
		snprintf(buf, len, "(bp%+d)", off);
	else if (reg == 9)		/* ORC_REG_SP_INDIRECT */
		snprintf(buf, len, "(sp)%+d", off);
	else if (reg == 0)		/* ORC_REG_UNDEFINED */
		snprintf(buf, len, "(und)");
	else
		snprintf(buf, len, "%s%+d", orc_reg_name(reg), off);
}

void kp_orc_format(const struct kp_orc *o, char *buf, size_t len)
{
	static const char *const types[] = {
		"(und)", "end", "call", "regs", "regs (partial)",
	};
	char sp[32], bp[32];

	if (!o->found) {
		snprintf(buf, len, "no ORC data");
		return;
	}
	orc_format_reg(sp, sizeof(sp), o->sp_reg, o->sp_offset);
	orc_format_reg(bp, sizeof(bp), o->bp_reg, o->bp_offset);
	snprintf(buf, len, "type:%s sp:%s bp:%s signal:%d",
		 o->type < sizeof(types) / sizeof(types[0]) ? types[o->type] : "?", sp, bp,
		 o->signal);
}

/*
 * Hands vmlinux's symbols to libkpx in /proc/kallsyms' format, as
 * scripts/kallsyms would list them: named symbols of allocated sections,
 * 't'/'T' in executable ones (local/global), 'd'/'D' elsewhere.
 * Assembler-local and mapping symbols are left out.
 */
struct ksym_out {
	const struct vmlinux *vm;
	FILE *out;
};

/* One line of load_symbols(). */
static int print_ksym(const Elf64_Sym *sym, const char *name, void *arg)
{
	const struct vmlinux *vm = ((struct ksym_out *)arg)->vm;
	FILE *out = ((struct ksym_out *)arg)->out;
	int type = ELF64_ST_TYPE(sym->st_info);
	bool global = ELF64_ST_BIND(sym->st_info) != STB_LOCAL;
	const Elf64_Shdr *in;

	if (!name[0] || name[0] == '$' || !strncmp(name, ".L", 2) ||
	    sym->st_shndx == SHN_UNDEF || sym->st_shndx >= nsections(vm) ||
	    (type != STT_FUNC && type != STT_NOTYPE && type != STT_OBJECT))
		return 0;
	in = shdr(vm, sym->st_shndx);
	if (!(in->sh_flags & SHF_ALLOC))
		return 0;
	fprintf(out, "%016llx %c %s\n", (unsigned long long)sym->st_value,
		in->sh_flags & SHF_EXECINSTR ? (global ? 'T' : 't') : (global ? 'D' : 'd'), name);
	return 0;
}

static int load_symbols(const struct vmlinux *vm)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct ksym_out arg = { vm, out };
	int err;

	if (!out)
		return -errno;
	for_each_elf_sym(vm, print_ksym, &arg);
	if (fclose(out))
		return -ENOMEM;
	err = kpx_kallsyms_load_stream(fmemopen(buf, len, "r"));
	free(buf);
	return err;
}

static int vmlinux_map(struct vmlinux *vm, const char *path, bool offline)
{
	const Elf64_Ehdr *eh;
	unsigned long long text;
	struct stat st;
	int fd, err;

	memset(vm, 0, sizeof(*vm));
	vm->offline = offline;
	snprintf(vm->path, sizeof(vm->path), "%s", path);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -EINVAL;
	}
	vm->len = st.st_size;
	vm->map = mmap(NULL, vm->len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (vm->map == MAP_FAILED) {
		vm->map = NULL;
		return -errno;
	}
	eh = (const Elf64_Ehdr *)vm->map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_X86_64 ||
	    eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize > vm->len) {
		vmlinux_close(vm);
		return -ENOEXEC;
	}
	if (offline) {
		err = load_symbols(vm);
		if (err) {
			vmlinux_close(vm);
			return err;
		}
		vm->build_id_match = -1;
	} else {
		text = elf_sym(vm, "_text");
		vm->delta = text ? (long long)(ksym_addr("_text") - text) : 0;
		vm->build_id_match = check_build_id(vm);
	}
	load_orc(vm);
	return 0;
}

int vmlinux_open(struct vmlinux *vm, const char *path)
{
	return vmlinux_map(vm, path, false);
}

int vmlinux_open_offline(struct vmlinux *vm, const char *path)
{
	return vmlinux_map(vm, path, true);
}

void vmlinux_close(struct vmlinux *vm)
{
	if (vm->map)
		munmap((void *)vm->map, vm->len);
	vm->map = NULL;
	free(vm->orc_order);
	vm->orc_order = NULL;
	free(vm->syms);
	vm->syms = NULL;
	vm->nsyms = 0;
	vm->syms_cap = 0;
	vm->norc = 0;
}

static void addr_add(struct addr_set *s, unsigned long long a)
{
	unsigned long long *n = realloc(s->a, (s->n + 1) * sizeof(*n));

	if (!n)
		return;
	s->a = n;
	s->a[s->n++] = a;
}

static void span_add(struct span_set *s, unsigned long long start,
		     unsigned long long end, const char *name)
{
	struct span *n = realloc(s->s, (s->n + 1) * sizeof(*n));

	if (!n)
		return;
	s->s = n;
	s->s[s->n].start = start;
	s->s[s->n].end = end;
	snprintf(s->s[s->n].name, sizeof(s->s[s->n].name), "%s", name ? name : "");
	s->n++;
}

bool addr_set_has(const struct addr_set *s, unsigned long long a)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->a[i] == a)
			return true;
	return false;
}

const struct span *span_set_overlap(const struct span_set *s, unsigned long long start,
				    unsigned long long end)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->s[i].start <= end && s->s[i].end > start)
			return &s->s[i];
	return NULL;
}

/* A kernel table between two vmlinux symbols: entries of @esize bytes. */
struct table {
	const unsigned char *p;
	unsigned long long va;		/* link address of the first entry */
	size_t n;
};

static bool table_get(const struct vmlinux *vm, const char *start, const char *stop,
		      size_t esize, struct table *t)
{
	unsigned long long a = elf_sym(vm, start), b = elf_sym(vm, stop);

	memset(t, 0, sizeof(*t));
	if (!a || b <= a || (b - a) % esize)
		return false;
	t->p = image_at(vm, a, b - a);
	t->va = a;
	t->n = (b - a) / esize;
	return t->p != NULL;
}

/* Running address of a relative reference at table byte @off. */
static unsigned long long rel(const struct vmlinux *vm, const struct table *t, size_t off)
{
	int32_t v;

	memcpy(&v, t->p + off, sizeof(v));
	return t->va + off + (long long)v + vm->delta;
}

static bool in_func(const struct kfunc *f, unsigned long long a)
{
	return a >= f->addr && a < f->addr + f->size + KFUNC_SLACK;
}

static void load_addr_table(struct kfunc *f, const struct vmlinux *vm, const char *start,
			    const char *stop, size_t esize, struct addr_set *out)
{
	struct table t;

	if (!table_get(vm, start, stop, esize, &t))
		return;
	for (size_t i = 0; i < t.n; i++) {
		unsigned long long a = rel(vm, &t, i * esize);

		if (in_func(f, a))
			addr_add(out, a);
	}
}

static int insn_len_at(const struct kfunc *f, unsigned long long a, int dflt)
{
	struct kp_insn ki;
	size_t off = a - f->addr;

	if (a < f->addr || off >= f->size + KFUNC_SLACK)
		return dflt;
	if (!kp_decode(f->text + off, f->size + KFUNC_SLACK - off, &ki))
		return dflt;
	return ki.len;
}

/* struct jump_entry { s32 code; s32 target; long key; }, key bit 1: init */
static void load_jump_labels(struct kfunc *f, const struct vmlinux *vm)
{
	struct table t;

	if (!table_get(vm, "__start___jump_table", "__stop___jump_table", 16, &t))
		return;
	for (size_t i = 0; i < t.n; i++) {
		unsigned long long a = rel(vm, &t, i * 16);
		int64_t key;

		memcpy(&key, t.p + i * 16 + 8, sizeof(key));
		if (!in_func(f, a) || (key & 2))
			continue;
		span_add(&f->jump_labels, a, a + insn_len_at(f, a, 5), "jump label");
	}
}

/* struct static_call_site { s32 addr; s32 key; }, key flag 2: init */
static void load_static_calls(struct kfunc *f, const struct vmlinux *vm)
{
	struct table t;

	if (!table_get(vm, "__start_static_call_sites", "__stop_static_call_sites", 8, &t))
		return;
	for (size_t i = 0; i < t.n; i++) {
		unsigned long long a = rel(vm, &t, i * 8);
		unsigned long long key = rel(vm, &t, i * 8 + 4);

		if (!in_func(f, a) || (key & 2))
			continue;
		span_add(&f->static_calls, a, a + 5, "static call");
	}
}

/* struct alt_instr (packed): s32 instr, s32 repl, u32 ft_flags, u8 instrlen, u8 repllen */
static void load_alternatives(struct kfunc *f, const struct vmlinux *vm)
{
	struct table t;

	if (!table_get(vm, "__alt_instructions", "__alt_instructions_end", 14, &t))
		return;
	for (size_t i = 0; i < t.n; i++) {
		unsigned long long a = rel(vm, &t, i * 14);

		if (in_func(f, a))
			span_add(&f->alternatives, a, a + t.p[i * 14 + 12], "alternative");
	}
}

/* ftrace call sites: tracefs when readable, else vmlinux's __mcount_loc. */
static void load_ftrace(struct kfunc *f, const struct vmlinux *vm)
{
	FILE *fp = vm->offline ? NULL :
		   fopen("/sys/kernel/tracing/available_filter_functions_addrs", "r");
	char line[512];
	struct table t;

	if (fp) {
		unsigned long long a;

		f->ftrace_from_tracefs = true;
		while (fgets(line, sizeof(line), fp))
			if (sscanf(line, "%llx", &a) == 1 && in_func(f, a))
				span_add(&f->ftrace, a, a + 5, "ftrace");
		fclose(fp);
		return;
	}
	if (!table_get(vm, "__start_mcount_loc", "__stop_mcount_loc", 8, &t))
		return;
	for (size_t i = 0; i < t.n; i++) {
		uint64_t a;

		memcpy(&a, t.p + i * 8, sizeof(a));
		a += vm->delta;
		if (in_func(f, a))
			span_add(&f->ftrace, a, a + 5, "ftrace");
	}
}

/* A blacklist entry for the symbol at @a: up to the next symbol, as kallsyms sizes it. */
static void blacklist_sym(struct kfunc *f, unsigned long long a)
{
	const struct kpx_ksym *s = kpx_ksym_at(a), *next = s ? kpx_ksym_next(s) : NULL;

	if (next && a < f->addr + f->size + KFUNC_SLACK && next->addr > f->addr)
		span_add(&f->blacklist, a, next->addr, s->name);
}

/*
 * populate_kprobe_blacklist() from vmlinux: the functions of the
 * _kprobe_blacklist table (NOKPROBE_SYMBOL()), and the areas that
 * kprobe_add_area_blacklist() adds: .kprobes.text, .noinstr.text and
 * (arch_populate_kprobe_blacklist()) the entry text.
 */
static void load_blacklist_offline(struct kfunc *f, const struct vmlinux *vm)
{
	static const char *const areas[][2] = {
		{ "__kprobes_text_start", "__kprobes_text_end" },
		{ "__noinstr_text_start", "__noinstr_text_end" },
		{ "__entry_text_start", "__entry_text_end" },
	};
	struct table t;

	if (table_get(vm, "__start_kprobe_blacklist", "__stop_kprobe_blacklist", 8, &t)) {
		for (size_t i = 0; i < t.n; i++) {
			uint64_t a;

			memcpy(&a, t.p + i * 8, sizeof(a));
			blacklist_sym(f, a);
		}
	}
	for (size_t i = 0; i < sizeof(areas) / sizeof(areas[0]); i++) {
		unsigned long long a = elf_sym(vm, areas[i][0]), b = elf_sym(vm, areas[i][1]);

		if (a && b > a && a < f->addr + f->size + KFUNC_SLACK && b > f->addr)
			span_add(&f->blacklist, a, b, areas[i][0]);
	}
}

static void load_blacklist(struct kfunc *f, const struct vmlinux *vm)
{
	FILE *fp;
	unsigned long long a, b;
	char line[512], name[256];

	if (vm->offline) {
		load_blacklist_offline(f, vm);
		return;
	}
	fp = fopen(KPROBES_BLACKLIST, "r");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "0x%llx-0x%llx %255s", &a, &b, name) == 3)
			span_add(&f->blacklist, a, b, name);
	fclose(fp);
}

static void load_kprobes(struct kfunc *f)
{
	FILE *fp = fopen(KPROBES_LIST, "r");
	unsigned long long a;
	char line[512];

	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "%llx", &a) == 1 && a >= f->addr && a < f->addr + f->size)
			addr_add(&f->kprobes, a);
	fclose(fp);
}

static int cpu_count(const char *path)
{
	FILE *fp = fopen(path, "r");
	char buf[256], *tok, *save = NULL;
	int n = 0, a, b;

	if (!fp)
		return -1;
	if (!fgets(buf, sizeof(buf), fp))
		buf[0] = '\0';
	fclose(fp);
	for (tok = strtok_r(buf, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save)) {
		if (sscanf(tok, "%d-%d", &a, &b) == 2)
			n += b - a + 1;
		else if (sscanf(tok, "%d", &a) == 1)
			n++;
	}
	return n;
}

/*
 * The text as the kernel's decoders see it (recover_probed_instruction()):
 * ftrace sites read as the 5-byte NOP, and bytes that registered kprobes
 * replaced read as the original (taken from vmlinux).
 */
static void recover_text(struct kfunc *f)
{
	static const unsigned char nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	for (size_t i = 0; i < f->ftrace.n; i++) {
		unsigned long long off = f->ftrace.s[i].start - f->addr;

		if (off + 5 <= f->size + KFUNC_SLACK)
			memcpy(f->text + off, nop5, 5);
	}
	for (size_t i = 0; i < f->kprobes.n; i++) {
		unsigned long long off = f->kprobes.a[i] - f->addr;

		if (!span_set_overlap(&f->ftrace, f->kprobes.a[i], f->kprobes.a[i]) &&
		    off + 5 <= f->size + KFUNC_SLACK)
			memcpy(f->text + off, f->image + off, 5);
	}
}

/*
 * FUNC's bytes and KFUNC_SLACK more for the decoder; the slack past the end
 * of FUNC's section (the last function of a section) reads as zeroes.
 */
static int load_text(struct kfunc *f, const struct vmlinux *vm,
		     int (*read_live)(unsigned long long addr, void *buf, size_t len))
{
	size_t len = f->size + KFUNC_SLACK, have;
	unsigned long long va = f->addr - vm->delta;
	const Elf64_Shdr *sh = section_at(vm, va, f->size ? f->size : 1);
	const unsigned char *img;

	if (!sh)
		return -ERANGE;
	img = vm->map + sh->sh_offset + (va - sh->sh_addr);
	have = sh->sh_addr + sh->sh_size - va;
	if (have > len)
		have = len;
	f->init_text = !strcmp(section_name(vm, sh), ".init.text");
	f->image = calloc(1, len);
	f->text = calloc(1, len);
	if (!f->image || !f->text)
		return -ENOMEM;
	memcpy(f->image, img, have);
	f->live = read_live && !read_live(f->addr, f->text, len);
	if (!f->live)
		memcpy(f->text, f->image, len);
	return 0;
}

int kfunc_load(struct kfunc *f, struct vmlinux *vm, const char *name,
	       int (*read_live)(unsigned long long addr, void *buf, size_t len))
{
	struct ksym sym;
	int err, possible, online;

	memset(f, 0, sizeof(*f));
	err = ksym_lookup_func(name, &sym);
	if (err)
		return err;
	snprintf(f->name, sizeof(f->name), "%s", sym.name);
	snprintf(f->next, sizeof(f->next), "%s", sym.next);
	f->addr = sym.addr;
	f->size = sym.size;
	f->nsyms = sym.count;
	if (!elf_sym_at(vm, f->name, f->addr - vm->delta))
		return -ESRCH;
	err = load_text(f, vm, read_live);
	if (err)
		return err;

	load_ftrace(f, vm);
	if (!vm->offline)
		load_kprobes(f);
	recover_text(f);
	load_addr_table(f, vm, "__start___ex_table", "__stop___ex_table", 12, &f->extable);
	load_addr_table(f, vm, "__start___bug_table", "__stop___bug_table", 12, &f->bugs);
	load_addr_table(f, vm, "__smp_locks", "__smp_locks_end", 4, &f->smp_locks);
	load_jump_labels(f, vm);
	load_static_calls(f, vm);
	load_alternatives(f, vm);
	load_blacklist(f, vm);
	if (vm->norc) {
		f->orc = calloc(f->size + 1, sizeof(*f->orc));
		for (unsigned long long off = 0; f->orc && off <= f->size; off++)
			f->orc[off] = vmlinux_orc_find(vm, f->addr + off);
	}
	f->entry_text_start = ksym_addr("__entry_text_start");
	f->entry_text_end = ksym_addr("__entry_text_end");
	/* alternative_instructions(): patched to UP when only one CPU was present. */
	if (!vm->offline) {
		possible = cpu_count("/sys/devices/system/cpu/possible");
		online = cpu_count("/sys/devices/system/cpu/online");
		f->smp_alt_reserved = possible > 1 && online == 1;
	}
	return 0;
}

void kfunc_free(struct kfunc *f)
{
	free(f->text);
	free(f->image);
	free(f->extable.a);
	free(f->bugs.a);
	free(f->smp_locks.a);
	free(f->jump_labels.s);
	free(f->static_calls.s);
	free(f->alternatives.s);
	free(f->ftrace.s);
	free(f->blacklist.s);
	free(f->kprobes.a);
	free(f->orc);
	memset(f, 0, sizeof(*f));
}
