// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libkpx: a JSON writer in the manner of bpftool's json_writer: the caller
 * says what comes (an object, a name, a value), the writer puts the commas,
 * the quotes and the escapes, so that what it writes is always valid JSON.
 */
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include "kpx.h"

/* The length of the valid UTF-8 sequence at @s, or 0. */
static int utf8_len(const unsigned char *s)
{
	uint32_t cp;
	int n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void kpx_json_fputs(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	fputc('"', f);
	while (*s) {
		int n = utf8_len(s);

		if (!n) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		switch (*s) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*s < 0x20 || *s == 0x7f)
				fprintf(f, "\\u%04x", *s);
			else
				fputc(*s, f);
		}
		s++;
	}
	fputc('"', f);
}

void jw_init(struct kpx_json *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->first[0] = true;
}

/* Before a value (or a name in an object): the comma it needs. */
static void sep(struct kpx_json *w)
{
	if (w->after_name) {
		w->after_name = false;
		return;
	}
	if (!w->first[w->depth])
		fputc(',', w->f);
	w->first[w->depth] = false;
}

/*
 * Nesting deeper than KPX_JSON_DEPTH, or a close without its open, is a bug
 * of the caller: stop rather than write a document that does not parse.
 */
static void jw_misuse(const char *what)
{
	fprintf(stderr, "libkpx: JSON writer misused: %s\n", what);
	abort();
}

static void jw_open(struct kpx_json *w, char c, bool object)
{
	sep(w);
	fputc(c, w->f);
	if (w->depth + 1 >= KPX_JSON_DEPTH)
		jw_misuse("nested too deep");
	w->depth++;
	w->first[w->depth] = true;
	w->in_object[w->depth] = object;
}

static void jw_close(struct kpx_json *w, char c)
{
	if (w->depth == 0 || w->in_object[w->depth] != (c == '}') || w->after_name)
		jw_misuse("close without its open, or after a name");
	fputc(c, w->f);
	w->depth--;
	if (!w->depth) {
		fputc('\n', w->f);
		fflush(w->f);
		w->docs++;
		w->first[0] = true;
	}
}

void jw_start_object(struct kpx_json *w)
{
	jw_open(w, '{', true);
}

void jw_end_object(struct kpx_json *w)
{
	jw_close(w, '}');
}

void jw_start_array(struct kpx_json *w)
{
	jw_open(w, '[', false);
}

void jw_end_array(struct kpx_json *w)
{
	jw_close(w, ']');
}

void jw_name(struct kpx_json *w, const char *name)
{
	sep(w);
	kpx_json_fputs(w->f, name);
	fputc(':', w->f);
	w->after_name = true;
}

void jw_string(struct kpx_json *w, const char *s)
{
	sep(w);
	kpx_json_fputs(w->f, s);
}

void jw_stringf(struct kpx_json *w, const char *fmt, ...)
{
	char buf[256], *p = buf;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* Whole, however long: a cut string would be a wrong value. */
	if (n >= (int)sizeof(buf)) {
		p = malloc(n + 1);
		if (!p)
			abort();
		va_start(ap, fmt);
		vsnprintf(p, n + 1, fmt, ap);
		va_end(ap);
	}
	jw_string(w, n < 0 ? "" : p);
	if (p != buf)
		free(p);
}

void jw_int(struct kpx_json *w, long long v)
{
	sep(w);
	fprintf(w->f, "%lld", v);
}

void jw_uint(struct kpx_json *w, unsigned long long v)
{
	sep(w);
	fprintf(w->f, "%llu", v);
}

void jw_float(struct kpx_json *w, int prec, double v)
{
	sep(w);
	if (isfinite(v))
		fprintf(w->f, "%.*f", prec, v);
	else
		fputs("null", w->f);
}

void jw_bool(struct kpx_json *w, bool v)
{
	sep(w);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct kpx_json *w)
{
	sep(w);
	fputs("null", w->f);
}

void jw_hex(struct kpx_json *w, unsigned long long v)
{
	jw_stringf(w, "0x%llx", v);
}

void jw_string_field(struct kpx_json *w, const char *name, const char *s)
{
	jw_name(w, name);
	jw_string(w, s);
}

void jw_int_field(struct kpx_json *w, const char *name, long long v)
{
	jw_name(w, name);
	jw_int(w, v);
}

void jw_uint_field(struct kpx_json *w, const char *name, unsigned long long v)
{
	jw_name(w, name);
	jw_uint(w, v);
}

void jw_float_field(struct kpx_json *w, const char *name, int prec, double v)
{
	jw_name(w, name);
	jw_float(w, prec, v);
}

void jw_bool_field(struct kpx_json *w, const char *name, bool v)
{
	jw_name(w, name);
	jw_bool(w, v);
}

void jw_null_field(struct kpx_json *w, const char *name)
{
	jw_name(w, name);
	jw_null(w);
}

void jw_hex_field(struct kpx_json *w, const char *name, unsigned long long v)
{
	jw_name(w, name);
	jw_hex(w, v);
}

void jw_object_field(struct kpx_json *w, const char *name)
{
	jw_name(w, name);
	jw_start_object(w);
}

void jw_array_field(struct kpx_json *w, const char *name)
{
	jw_name(w, name);
	jw_start_array(w);
}
