/*
 * deskwire.c: the codec declared in deskwire.h, written from docs/protocol.md.
 *
 * Owns: header checks, payload layouts, the incremental decoder, the encoder, and a JSON
 * reader/writer with exactly the rules of the spec's section 6. Invariants: see deskwire.h.
 * May not depend on: anything but the C99 standard library.
 */
#include "deskwire.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------------------ */

static const char *const TYPE_NAMES[] = {NULL,      "HELLO",  "WELCOME",          "INPUT",    "RESIZE",
                                         "OUTPUT",  "KEYFRAME", "SNAPSHOT_REQUEST", "SNAPSHOT", "EVENT",
                                         "DETACH",  "EXIT",   "ERROR",            "PING",     "PONG",
                                         "SIGNAL",  "HOOK",   "TERMINAL"};
static const char *const CODE_NAMES[] = {NULL,          "BAD_HELLO",  "UNSUPPORTED_VERSION", "TOO_LARGE",
                                         "UNKNOWN_TYPE", "MALFORMED",  "NOT_PERMITTED",       "INPUT_FULL",
                                         "TOO_SLOW",     "EXITING",    "INTERNAL",            "PEER_REFUSED",
                                         "SESSION_FULL"};
static const char *const ROLE_NAMES[] = {NULL, "controller", "viewer", "observer", "query"};
static const char *const MOUSE_NAMES[] = {"none", "press", "press_release", "button_motion", "any_motion"};
static const char *const MOUSE_ENC_NAMES[] = {"default", "utf8", "sgr", "urxvt"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const char *const *names, size_t n, int value) {
    if (value <= 0 || (size_t)value >= n) return NULL;
    return names[value];
}

static int value_of(const char *const *names, size_t n, const char *name) {
    size_t i;
    for (i = 1; i < n; i++)
        if (strcmp(names[i], name) == 0) return (int)i;
    return 0;
}

const char *dw_type_name(int type) { return name_of(TYPE_NAMES, COUNT(TYPE_NAMES), type); }
const char *dw_code_name(int code) { return name_of(CODE_NAMES, COUNT(CODE_NAMES), code); }
const char *dw_role_name(int role) { return name_of(ROLE_NAMES, COUNT(ROLE_NAMES), role); }
int dw_type_from_name(const char *name) { return value_of(TYPE_NAMES, COUNT(TYPE_NAMES), name); }
int dw_code_from_name(const char *name) { return value_of(CODE_NAMES, COUNT(CODE_NAMES), name); }
int dw_role_from_name(const char *name) { return value_of(ROLE_NAMES, COUNT(ROLE_NAMES), name); }

static int fail(dw_error *err, int code, const char *fmt, ...) {
    va_list ap;
    if (err) {
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- byte helpers (little-endian, byte by byte) ------------------------------------------ */

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | ((unsigned)p[1] << 8)); }

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
    int i;
    for (i = 0; i < 4; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xffu);
}

static void put_u64(uint8_t *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (uint8_t)((v >> (8 * i)) & 0xffu);
}

/* An i32 from its two's-complement bits, without implementation-defined conversions. */
static int32_t i32_from_bits(uint32_t bits) {
    if (bits <= 0x7fffffffu) return (int32_t)bits;
    return (int32_t)(bits - 0x80000000u) - 0x7fffffff - 1;
}

static uint32_t i32_to_bits(int32_t v) {
    if (v >= 0) return (uint32_t)v;
    return (uint32_t)(v + 0x7fffffff + 1) + 0x80000000u;
}

/* ---- buffers and UTF-8 ------------------------------------------------------------------- */

static int buf_reserve(dw_buf *buf, size_t extra) {
    size_t need, cap;
    uint8_t *grown;
    if (extra > (size_t)-1 - buf->len) return -1;
    need = buf->len + extra;
    if (need <= buf->cap) return 0;
    cap = buf->cap ? buf->cap : 64;
    while (cap < need) cap = cap > (size_t)-1 / 2 ? need : cap * 2;
    grown = realloc(buf->data, cap);
    if (!grown) return -1;
    buf->data = grown;
    buf->cap = cap;
    return 0;
}

int dw_buf_append(dw_buf *buf, const void *bytes, size_t n) {
    if (n == 0) return 0;
    if (buf_reserve(buf, n) != 0) return -1;
    memcpy(buf->data + buf->len, bytes, n);
    buf->len += n;
    return 0;
}

static int buf_str(dw_buf *buf, const char *s) { return dw_buf_append(buf, s, strlen(s)); }

static int buf_byte(dw_buf *buf, uint8_t b) { return dw_buf_append(buf, &b, 1); }

void dw_buf_free(dw_buf *buf) {
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

/* Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 if there is none. */
static size_t utf8_seq(const uint8_t *p, size_t n) {
    uint8_t b = p[0];
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (b >= 0xe0 && b <= 0xef) {
        uint8_t lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
        return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        uint8_t lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
        return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

int dw_utf8_valid(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

/* ---- JSON: values ------------------------------------------------------------------------ */

void dw_json_free(dw_json *v) {
    size_t i;
    if (!v) return;
    switch (v->kind) {
    case DW_JSTRING:
        free(v->u.str.ptr);
        break;
    case DW_JARRAY:
        for (i = 0; i < v->u.arr.len; i++) dw_json_free(&v->u.arr.items[i]);
        free(v->u.arr.items);
        break;
    case DW_JOBJECT:
        for (i = 0; i < v->u.obj.len; i++) {
            free(v->u.obj.members[i].key.ptr);
            dw_json_free(&v->u.obj.members[i].value);
        }
        free(v->u.obj.members);
        break;
    default:
        break;
    }
    v->kind = DW_JNULL;
}

static int str_cmp(const dw_str *a, const dw_str *b) {
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->ptr, b->ptr, n) : 0;
    if (c != 0) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

static int str_eq(const dw_str *a, const dw_str *b) { return a->len == b->len && str_cmp(a, b) == 0; }

int dw_json_equal(const dw_json *a, const dw_json *b) {
    size_t i;
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case DW_JNULL:
        return 1;
    case DW_JBOOL:
        return !a->u.boolean == !b->u.boolean;
    case DW_JUINT:
        return a->u.uint == b->u.uint;
    case DW_JINT:
        return a->u.sint == b->u.sint;
    case DW_JFLOAT:
        return a->u.num == b->u.num && !signbit(a->u.num) == !signbit(b->u.num);
    case DW_JSTRING:
        return str_eq(&a->u.str, &b->u.str);
    case DW_JARRAY:
        if (a->u.arr.len != b->u.arr.len) return 0;
        for (i = 0; i < a->u.arr.len; i++)
            if (!dw_json_equal(&a->u.arr.items[i], &b->u.arr.items[i])) return 0;
        return 1;
    case DW_JOBJECT:
        if (a->u.obj.len != b->u.obj.len) return 0;
        for (i = 0; i < a->u.obj.len; i++) {
            if (!str_eq(&a->u.obj.members[i].key, &b->u.obj.members[i].key)) return 0;
            if (!dw_json_equal(&a->u.obj.members[i].value, &b->u.obj.members[i].value)) return 0;
        }
        return 1;
    }
    return 0;
}

const dw_json *dw_json_get(const dw_json *object, const char *key) {
    size_t i, n = strlen(key);
    const dw_json *found = NULL;
    if (!object || object->kind != DW_JOBJECT) return NULL;
    for (i = 0; i < object->u.obj.len; i++) {
        const dw_str *k = &object->u.obj.members[i].key;
        if (k->len == n && memcmp(k->ptr, key, n) == 0) found = &object->u.obj.members[i].value;
    }
    return found;
}

/* ---- JSON: reader ------------------------------------------------------------------------ */

typedef struct {
    const uint8_t *p;
    size_t n, i;
    enum dw_json_mode mode;
    dw_error *err;
} reader;

static int jfail(reader *r, const char *what) {
    return fail(r->err, DW_MALFORMED, "%s at byte %lu", what, (unsigned long)r->i);
}

static void skip_ws(reader *r) {
    while (r->i < r->n && (r->p[r->i] == ' ' || r->p[r->i] == '\t' || r->p[r->i] == '\n' || r->p[r->i] == '\r'))
        r->i++;
}

static int hex4(reader *r, unsigned *out) {
    unsigned v = 0;
    int k;
    if (r->n - r->i < 4) return jfail(r, "EOF while parsing a \\u escape");
    for (k = 0; k < 4; k++) {
        uint8_t c = r->p[r->i + (size_t)k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return jfail(r, "invalid \\u escape");
    }
    r->i += 4;
    *out = v;
    return 0;
}

static int put_utf8(dw_buf *b, unsigned cp) {
    uint8_t s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { s[0] = (uint8_t)(0xc0 | (cp >> 6)); s[1] = (uint8_t)(0x80 | (cp & 0x3f)); n = 2; }
    else if (cp < 0x10000) {
        s[0] = (uint8_t)(0xe0 | (cp >> 12)); s[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        s[2] = (uint8_t)(0x80 | (cp & 0x3f)); n = 3;
    } else {
        s[0] = (uint8_t)(0xf0 | (cp >> 18)); s[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
        s[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)); s[3] = (uint8_t)(0x80 | (cp & 0x3f)); n = 4;
    }
    return dw_buf_append(b, s, n);
}

/* A string starting at the opening quote. */
static int read_string(reader *r, dw_str *out) {
    dw_buf b = {NULL, 0, 0};
    r->i++; /* the quote */
    for (;;) {
        uint8_t c;
        if (r->i >= r->n) { dw_buf_free(&b); return jfail(r, "EOF while parsing a string"); }
        c = r->p[r->i];
        if (c == '"') { r->i++; break; }
        if (c < 0x20) { dw_buf_free(&b); return jfail(r, "control character (\\u0000-\\u001F) in a string"); }
        if (c == '\\') {
            unsigned cp;
            if (r->i + 1 >= r->n) { dw_buf_free(&b); return jfail(r, "EOF while parsing a string"); }
            c = r->p[r->i + 1];
            r->i += 2;
            switch (c) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = 0x08; break;
            case 'f': cp = 0x0c; break;
            case 'n': cp = 0x0a; break;
            case 'r': cp = 0x0d; break;
            case 't': cp = 0x09; break;
            case 'u':
                if (hex4(r, &cp) != 0) { dw_buf_free(&b); return -1; }
                if (cp >= 0xdc00 && cp <= 0xdfff) { dw_buf_free(&b); return jfail(r, "lone surrogate in a \\u escape"); }
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned lo;
                    if (r->n - r->i < 2 || r->p[r->i] != '\\' || r->p[r->i + 1] != 'u') {
                        dw_buf_free(&b);
                        return jfail(r, "lone surrogate in a \\u escape");
                    }
                    r->i += 2;
                    if (hex4(r, &lo) != 0) { dw_buf_free(&b); return -1; }
                    if (lo < 0xdc00 || lo > 0xdfff) { dw_buf_free(&b); return jfail(r, "lone surrogate in a \\u escape"); }
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                break;
            default:
                dw_buf_free(&b);
                return jfail(r, "invalid escape");
            }
            if (put_utf8(&b, cp) != 0) { dw_buf_free(&b); return fail(r->err, DW_MALFORMED, "out of memory"); }
        } else {
            size_t k = utf8_seq(r->p + r->i, r->n - r->i);
            if (k == 0) { dw_buf_free(&b); return jfail(r, "invalid UTF-8 in a string"); }
            if (dw_buf_append(&b, r->p + r->i, k) != 0) { dw_buf_free(&b); return fail(r->err, DW_MALFORMED, "out of memory"); }
            r->i += k;
        }
    }
    if (buf_byte(&b, 0) != 0) { dw_buf_free(&b); return fail(r->err, DW_MALFORMED, "out of memory"); }
    out->ptr = (char *)b.data;
    out->len = b.len - 1;
    return 0;
}

static int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* A number: integers that fit are kept exact (u64, or i64 when negative); everything else,
 * `-0` included, is the correctly rounded binary64 value; a value too large for binary64 is
 * refused. */
static int read_number(reader *r, dw_json *out) {
    size_t start = r->i, int_start;
    int negative = 0, is_float = 0;
    char tmp[64];
    char *heap = NULL, *text;
    size_t len;
    double d;
    if (r->p[r->i] == '-') { negative = 1; r->i++; }
    int_start = r->i;
    if (r->i >= r->n || !is_digit(r->p[r->i])) return jfail(r, "invalid number");
    if (r->p[r->i] == '0') {
        r->i++;
        if (r->i < r->n && is_digit(r->p[r->i])) return jfail(r, "invalid number (leading zero)");
    } else {
        while (r->i < r->n && is_digit(r->p[r->i])) r->i++;
    }
    if (r->i < r->n && r->p[r->i] == '.') {
        is_float = 1;
        r->i++;
        if (r->i >= r->n || !is_digit(r->p[r->i])) return jfail(r, "invalid number");
        while (r->i < r->n && is_digit(r->p[r->i])) r->i++;
    }
    if (r->i < r->n && (r->p[r->i] == 'e' || r->p[r->i] == 'E')) {
        is_float = 1;
        r->i++;
        if (r->i < r->n && (r->p[r->i] == '+' || r->p[r->i] == '-')) r->i++;
        if (r->i >= r->n || !is_digit(r->p[r->i])) return jfail(r, "invalid number");
        while (r->i < r->n && is_digit(r->p[r->i])) r->i++;
    }
    if (!is_float) {
        uint64_t v = 0;
        size_t k;
        int overflow = 0;
        for (k = int_start; k < r->i; k++) {
            unsigned digit = (unsigned)(r->p[k] - '0');
            if (v > (UINT64_MAX - digit) / 10) { overflow = 1; break; }
            v = v * 10 + digit;
        }
        if (!overflow && !negative) {
            out->kind = DW_JUINT;
            out->u.uint = v;
            return 0;
        }
        if (!overflow && negative && v != 0 && v <= (uint64_t)INT64_MAX + 1) {
            out->kind = DW_JINT;
            out->u.sint = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
            return 0;
        }
    }
    len = r->i - start;
    if (len < sizeof tmp) {
        text = tmp;
    } else {
        heap = malloc(len + 1);
        if (!heap) return fail(r->err, DW_MALFORMED, "out of memory");
        text = heap;
    }
    memcpy(text, r->p + start, len);
    text[len] = '\0';
    d = strtod(text, NULL);
    free(heap);
    if (d > DBL_MAX || d < -DBL_MAX) return jfail(r, "number out of range");
    out->kind = DW_JFLOAT;
    out->u.num = d;
    return 0;
}

static int read_value(reader *r, dw_json *out, int depth);

/* Stable merge sort of members by key, for DW_JSON_SORTED. */
static void sort_members(dw_member *m, dw_member *tmp, size_t n) {
    size_t mid, i, j, k;
    if (n < 2) return;
    mid = n / 2;
    sort_members(m, tmp, mid);
    sort_members(m + mid, tmp, n - mid);
    i = 0; j = mid; k = 0;
    while (i < mid && j < n) tmp[k++] = str_cmp(&m[j].key, &m[i].key) < 0 ? m[j++] : m[i++];
    while (i < mid) tmp[k++] = m[i++];
    while (j < n) tmp[k++] = m[j++];
    memcpy(m, tmp, n * sizeof *m);
}

/* Sort by key and keep the last of each run of equal keys (serde_json's map semantics). */
static int sort_and_dedup(dw_json *obj) {
    dw_member *m = obj->u.obj.members, *tmp;
    size_t n = obj->u.obj.len, i, kept = 0;
    if (n < 2) return 0;
    tmp = malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    sort_members(m, tmp, n);
    free(tmp);
    for (i = 0; i < n; i++) {
        if (i + 1 < n && str_eq(&m[i].key, &m[i + 1].key)) {
            free(m[i].key.ptr);
            dw_json_free(&m[i].value);
            continue;
        }
        m[kept++] = m[i];
    }
    obj->u.obj.len = kept;
    return 0;
}

static int read_array(reader *r, dw_json *out, int depth) {
    size_t cap = 0;
    out->kind = DW_JARRAY;
    out->u.arr.items = NULL;
    out->u.arr.len = 0;
    r->i++;
    skip_ws(r);
    if (r->i < r->n && r->p[r->i] == ']') { r->i++; return 0; }
    for (;;) {
        if (out->u.arr.len == cap) {
            size_t nc = cap ? cap * 2 : 4;
            dw_json *grown = realloc(out->u.arr.items, nc * sizeof *grown);
            if (!grown) { dw_json_free(out); return fail(r->err, DW_MALFORMED, "out of memory"); }
            out->u.arr.items = grown;
            cap = nc;
        }
        skip_ws(r);
        if (read_value(r, &out->u.arr.items[out->u.arr.len], depth) != 0) { dw_json_free(out); return -1; }
        out->u.arr.len++;
        skip_ws(r);
        if (r->i >= r->n) { dw_json_free(out); return jfail(r, "EOF while parsing a list"); }
        if (r->p[r->i] == ',') { r->i++; continue; }
        if (r->p[r->i] == ']') { r->i++; return 0; }
        dw_json_free(out);
        return jfail(r, "expected `,` or `]`");
    }
}

static int read_object(reader *r, dw_json *out, int depth) {
    size_t cap = 0;
    out->kind = DW_JOBJECT;
    out->u.obj.members = NULL;
    out->u.obj.len = 0;
    r->i++;
    skip_ws(r);
    if (r->i < r->n && r->p[r->i] == '}') { r->i++; return 0; }
    for (;;) {
        dw_member *m;
        if (out->u.obj.len == cap) {
            size_t nc = cap ? cap * 2 : 8;
            dw_member *grown = realloc(out->u.obj.members, nc * sizeof *grown);
            if (!grown) { dw_json_free(out); return fail(r->err, DW_MALFORMED, "out of memory"); }
            out->u.obj.members = grown;
            cap = nc;
        }
        skip_ws(r);
        if (r->i >= r->n) { dw_json_free(out); return jfail(r, "EOF while parsing an object"); }
        if (r->p[r->i] != '"') { dw_json_free(out); return jfail(r, "key must be a string"); }
        m = &out->u.obj.members[out->u.obj.len];
        if (read_string(r, &m->key) != 0) { dw_json_free(out); return -1; }
        skip_ws(r);
        if (r->i >= r->n || r->p[r->i] != ':') {
            free(m->key.ptr);
            dw_json_free(out);
            return jfail(r, "expected `:`");
        }
        r->i++;
        skip_ws(r);
        if (read_value(r, &m->value, depth) != 0) {
            free(m->key.ptr);
            dw_json_free(out);
            return -1;
        }
        out->u.obj.len++;
        skip_ws(r);
        if (r->i >= r->n) { dw_json_free(out); return jfail(r, "EOF while parsing an object"); }
        if (r->p[r->i] == ',') { r->i++; continue; }
        if (r->p[r->i] == '}') { r->i++; break; }
        dw_json_free(out);
        return jfail(r, "expected `,` or `}`");
    }
    if (r->mode == DW_JSON_SORTED && sort_and_dedup(out) != 0) {
        dw_json_free(out);
        return fail(r->err, DW_MALFORMED, "out of memory");
    }
    return 0;
}

static int literal(reader *r, const char *word) {
    size_t n = strlen(word);
    if (r->n - r->i < n || memcmp(r->p + r->i, word, n) != 0) return jfail(r, "expected a value");
    r->i += n;
    return 0;
}

static int read_value(reader *r, dw_json *out, int depth) {
    uint8_t c;
    out->kind = DW_JNULL;
    if (r->i >= r->n) return jfail(r, "EOF while parsing a value");
    c = r->p[r->i];
    switch (c) {
    case '{':
    case '[':
        if (depth + 1 > DW_JSON_MAX_DEPTH) return jfail(r, "recursion limit exceeded");
        return c == '{' ? read_object(r, out, depth + 1) : read_array(r, out, depth + 1);
    case '"':
        out->kind = DW_JSTRING;
        if (read_string(r, &out->u.str) != 0) { out->kind = DW_JNULL; return -1; }
        return 0;
    case 't':
        out->kind = DW_JBOOL;
        out->u.boolean = 1;
        return literal(r, "true");
    case 'f':
        out->kind = DW_JBOOL;
        out->u.boolean = 0;
        return literal(r, "false");
    case 'n':
        return literal(r, "null");
    default:
        if (c == '-' || is_digit(c)) return read_number(r, out);
        return jfail(r, "expected a value");
    }
}

int dw_json_parse(const uint8_t *p, size_t n, enum dw_json_mode mode, dw_json *out, dw_error *err) {
    reader r;
    r.p = p;
    r.n = n;
    r.i = 0;
    r.mode = mode;
    r.err = err;
    out->kind = DW_JNULL;
    skip_ws(&r);
    if (read_value(&r, out, 0) != 0) return -1;
    skip_ws(&r);
    if (r.i != r.n) {
        dw_json_free(out);
        return jfail(&r, "trailing characters");
    }
    return 0;
}

/* ---- JSON: writer ------------------------------------------------------------------------ */

static int write_string(dw_buf *b, const char *s, size_t n, dw_error *err) {
    size_t i;
    static const char hex[] = "0123456789abcdef";
    if (!dw_utf8_valid((const uint8_t *)s, n)) return fail(err, DW_MALFORMED, "cannot encode a string that is not UTF-8");
    if (buf_byte(b, '"') != 0) return -1;
    for (i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case 0x08: esc = "\\b"; break;
        case 0x09: esc = "\\t"; break;
        case 0x0a: esc = "\\n"; break;
        case 0x0c: esc = "\\f"; break;
        case 0x0d: esc = "\\r"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
                u[4] = hex[c >> 4]; u[5] = hex[c & 0xf]; u[6] = '\0';
                esc = u;
            }
        }
        if (esc ? buf_str(b, esc) != 0 : buf_byte(b, c) != 0) return -1;
    }
    return buf_byte(b, '"');
}

/* Split "%.*e" output ("d.ddde+XX") into its digits and decimal exponent. */
static void split_e(const char *text, char digits[24], int *exp10) {
    const char *e = strchr(text, 'e'), *c;
    size_t k = 0;
    for (c = text; c < e && k < 23; c++)
        if (*c != '.') digits[k++] = *c;
    digits[k] = '\0';
    *exp10 = atoi(e + 1);
}

/* Whether the digits d1d2...dn (value d1.d2...dn * 10^exp10) read back to exactly d. */
static int reads_back(const char *digits, int exp10, double d) {
    char text[48];
    snprintf(text, sizeof text, "%c.%se%d", digits[0], digits + 1, exp10);
    return strtod(text, NULL) == d;
}

/* Add `delta` (+1 or -1) to the last digit, with carry or borrow; may change the exponent.
 * 0 when the result would lose its leading digit. */
static int step_digits(char digits[24], int *exp10, int delta) {
    int i = (int)strlen(digits) - 1, n = i + 1;
    while (i >= 0) {
        if (delta > 0 && digits[i] == '9') { digits[i--] = '0'; continue; }
        if (delta < 0 && digits[i] == '0') { digits[i--] = '9'; continue; }
        digits[i] = (char)(digits[i] + delta);
        break;
    }
    if (i < 0) { /* 99..9 + 1 = 100..0: one more power of ten, same length */
        if (delta < 0) return 0;
        digits[0] = '1';
        memset(digits + 1, '0', (size_t)(n - 1));
        (*exp10)++;
    }
    if (digits[0] == '0') { /* 100..0 - 1 = 99..9 at one power of ten less */
        if (n == 1) return 0;
        memmove(digits, digits + 1, (size_t)n);
        digits[n - 1] = '9';
        digits[n] = '\0';
        (*exp10)--;
    }
    return 1;
}

/* The shortest decimal digits that read back to d (finite, positive), and the decimal exponent
 * of the first digit: d ~ d1.d2...dn * 10^exp10. For each length from 1 to 17, the nearest
 * decimal of that length (snprintf rounds correctly), else its neighbours one unit in the last
 * place away: when d is a power of two the values that read back to d reach twice as far above
 * it as below, so the nearest can miss while the one above hits. */
static void shortest_digits(double d, char digits[24], int *exp10) {
    char text[40], trial[24];
    int precision, e;
    for (precision = 1; precision <= 17; precision++) {
        snprintf(text, sizeof text, "%.*e", precision - 1, d);
        split_e(text, digits, exp10);
        if (strtod(text, NULL) == d) break;
        memcpy(trial, digits, sizeof trial);
        e = *exp10;
        if (step_digits(trial, &e, 1) && reads_back(trial, e, d)) {
            memcpy(digits, trial, sizeof trial);
            *exp10 = e;
            break;
        }
        memcpy(trial, digits, sizeof trial);
        e = *exp10;
        if (step_digits(trial, &e, -1) && reads_back(trial, e, d)) {
            memcpy(digits, trial, sizeof trial);
            *exp10 = e;
            break;
        }
    }
    {
        size_t k = strlen(digits);
        while (k > 1 && digits[k - 1] == '0') k--;
        digits[k] = '\0';
    }
}

/* A finite binary64 as the spec's canonical form: fixed notation when the first digit's decimal
 * exponent is -5 ..= 15 (always with a '.'), else d[.ddd]e(+|-)x. */
static int write_float(dw_buf *b, double d, dw_error *err) {
    char digits[24], out[64];
    int e, n, k = 0, i;
    if (!(d == d) || d > DBL_MAX || d < -DBL_MAX) return fail(err, DW_MALFORMED, "cannot encode a non-finite number");
    if (signbit(d)) out[k++] = '-';
    if (d == 0) return dw_buf_append(b, out, (size_t)k) != 0 || buf_str(b, "0.0") != 0 ? -1 : 0;
    shortest_digits(fabs(d), digits, &e);
    n = (int)strlen(digits);
    if (e >= -5 && e <= 15) {
        if (n - 1 <= e) {
            for (i = 0; i < n; i++) out[k++] = digits[i];
            for (i = n; i <= e; i++) out[k++] = '0';
            out[k++] = '.';
            out[k++] = '0';
        } else if (e >= 0) {
            for (i = 0; i < n; i++) {
                out[k++] = digits[i];
                if (i == e) out[k++] = '.';
            }
        } else {
            out[k++] = '0';
            out[k++] = '.';
            for (i = 0; i < -e - 1; i++) out[k++] = '0';
            for (i = 0; i < n; i++) out[k++] = digits[i];
        }
    } else {
        out[k++] = digits[0];
        if (n > 1) {
            out[k++] = '.';
            for (i = 1; i < n; i++) out[k++] = digits[i];
        }
        k += snprintf(out + k, sizeof out - (size_t)k, "e%c%d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return dw_buf_append(b, out, (size_t)k);
}

static int write_uint(dw_buf *b, uint64_t v) {
    char s[24];
    int k = 23;
    s[k] = '\0';
    do {
        s[--k] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    return buf_str(b, s + k);
}

static int write_sint(dw_buf *b, int64_t v) {
    /* Negate in unsigned arithmetic so INT64_MIN needs no signed overflow. */
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0 && buf_byte(b, '-') != 0) return -1;
    return write_uint(b, magnitude);
}

static int write_json(dw_buf *b, const dw_json *v, dw_error *err) {
    size_t i;
    switch (v->kind) {
    case DW_JNULL:
        return buf_str(b, "null");
    case DW_JBOOL:
        return buf_str(b, v->u.boolean ? "true" : "false");
    case DW_JUINT:
        return write_uint(b, v->u.uint);
    case DW_JINT:
        return write_sint(b, v->u.sint);
    case DW_JFLOAT:
        return write_float(b, v->u.num, err);
    case DW_JSTRING:
        return write_string(b, v->u.str.ptr, v->u.str.len, err);
    case DW_JARRAY:
        if (buf_byte(b, '[') != 0) return -1;
        for (i = 0; i < v->u.arr.len; i++) {
            if (i && buf_byte(b, ',') != 0) return -1;
            if (write_json(b, &v->u.arr.items[i], err) != 0) return -1;
        }
        return buf_byte(b, ']');
    case DW_JOBJECT:
        if (buf_byte(b, '{') != 0) return -1;
        for (i = 0; i < v->u.obj.len; i++) {
            const dw_member *m = &v->u.obj.members[i];
            if (i && buf_byte(b, ',') != 0) return -1;
            if (write_string(b, m->key.ptr, m->key.len, err) != 0 || buf_byte(b, ':') != 0) return -1;
            if (write_json(b, &m->value, err) != 0) return -1;
        }
        return buf_byte(b, '}');
    }
    return -1;
}

int dw_json_encode(const dw_json *value, dw_buf *out, dw_error *err) {
    size_t before = out->len;
    if (err) err->code = 0;
    if (write_json(out, value, err) != 0) {
        out->len = before;
        if (!err || err->code == 0) return fail(err, DW_MALFORMED, "out of memory");
        return -1;
    }
    return 0;
}

/* ---- typed bodies: WELCOME's SessionInfo and SNAPSHOT's SnapshotReply --------------------- */

/* Prefix of every JSON body error, so a reader of logs knows the body was the problem. */
#define BODY_ERROR "invalid JSON body: "

typedef struct {
    const char *frame; /* "WELCOME" or "SNAPSHOT" */
    dw_error *err;
} body_ctx;

static int body_fail(body_ctx *c, const char *fmt, const char *a, const char *b) {
    char reason[200];
    snprintf(reason, sizeof reason, fmt, a, b);
    return fail(c->err, DW_MALFORMED, "malformed %s frame: " BODY_ERROR "%s", c->frame, reason);
}

/* Which of an object's known keys have been seen, to refuse a repeated one. */
static int mark_seen(body_ctx *c, unsigned long *seen, int index, const char *key) {
    if (*seen & (1ul << index)) return body_fail(c, "duplicate field `%s`%s", key, "");
    *seen |= 1ul << index;
    return 0;
}

static int check_missing(body_ctx *c, unsigned long seen, const char *const *keys, int n, unsigned long optional) {
    int i;
    for (i = 0; i < n; i++)
        if (!(seen & (1ul << i)) && !(optional & (1ul << i))) return body_fail(c, "missing field `%s`%s", keys[i], "");
    return 0;
}

static int want_uint(body_ctx *c, const dw_json *v, const char *key, uint64_t max, uint64_t *out) {
    if (v->kind != DW_JUINT) return body_fail(c, "invalid type for `%s`: expected %s", key, max == UINT64_MAX ? "u64" : max == 0xffffffffu ? "u32" : "u16");
    if (v->u.uint > max) return body_fail(c, "invalid value for `%s`: %s", key, "integer out of range");
    *out = v->u.uint;
    return 0;
}

static int want_bool(body_ctx *c, const dw_json *v, const char *key, int *out) {
    if (v->kind != DW_JBOOL) return body_fail(c, "invalid type for `%s`: expected %s", key, "a boolean");
    *out = v->u.boolean;
    return 0;
}

/* Moves the string out of the parsed value (so the value no longer owns it). */
static int take_string(body_ctx *c, dw_json *v, const char *key, dw_str *out) {
    if (v->kind != DW_JSTRING) return body_fail(c, "invalid type for `%s`: expected %s", key, "a string");
    *out = v->u.str;
    v->kind = DW_JNULL;
    return 0;
}

static int take_strings(body_ctx *c, dw_json *v, const char *key, dw_str **out, size_t *out_len) {
    size_t i;
    if (v->kind != DW_JARRAY) return body_fail(c, "invalid type for `%s`: expected %s", key, "an array of strings");
    for (i = 0; i < v->u.arr.len; i++)
        if (v->u.arr.items[i].kind != DW_JSTRING) return body_fail(c, "invalid type in `%s`: expected %s", key, "a string");
    *out = calloc(v->u.arr.len ? v->u.arr.len : 1, sizeof **out);
    if (!*out) return fail(c->err, DW_MALFORMED, "out of memory");
    for (i = 0; i < v->u.arr.len; i++) {
        (*out)[i] = v->u.arr.items[i].u.str;
        v->u.arr.items[i].kind = DW_JNULL;
    }
    *out_len = v->u.arr.len;
    return 0;
}

/* `state`: an object kept as received; null means absent. */
static int take_state(body_ctx *c, dw_json *v, dw_json **out) {
    if (v->kind == DW_JNULL) return 0;
    if (v->kind != DW_JOBJECT) return body_fail(c, "invalid type for `%s`: expected %s", "state", "an object");
    *out = malloc(sizeof **out);
    if (!*out) return fail(c->err, DW_MALFORMED, "out of memory");
    **out = *v;
    v->kind = DW_JNULL;
    return 0;
}

static int key_index(const dw_str *key, const char *const *keys, int n);

/* Keeps, in this order, the members of `obj` whose index in `keep` (one per known key, -1
 * for a member to drop) is set, freeing the others: the canonical form a typed reader
 * re-encodes (unknown keys and default values left out). */
static int rebuild_object(body_ctx *c, dw_json *obj, const int *slot, int nslots) {
    dw_member *old = obj->u.obj.members, *out;
    size_t i, n = 0;
    int k;
    out = calloc((size_t)nslots, sizeof *out);
    if (!out) return fail(c->err, DW_MALFORMED, "out of memory");
    for (k = 0; k < nslots; k++)
        if (slot[k] >= 0) out[n++] = old[slot[k]];
    for (i = 0; i < obj->u.obj.len; i++) {
        int kept = 0;
        for (k = 0; k < nslots; k++)
            if (slot[k] == (int)i) kept = 1;
        if (!kept) {
            free(old[i].key.ptr);
            dw_json_free(&old[i].value);
        }
    }
    free(old);
    obj->u.obj.members = out;
    obj->u.obj.len = n;
    return 0;
}

/* A history colour (`fg`, `bg`): an index 0-255 or a string; null reads as absent. */
static int check_color(body_ctx *c, const dw_json *v, const char *key, int *keep) {
    if (v->kind == DW_JNULL) return 0;
    if ((v->kind == DW_JUINT && v->u.uint <= 255) || v->kind == DW_JSTRING) {
        *keep = 1;
        return 0;
    }
    return body_fail(c, "invalid value for `%s`: %s", key, "data did not match any variant");
}

static const char *const RUN_KEYS[] = {"text", "fg", "bg", "flags"};
static const char *const ROW_KEYS[] = {"text", "wrapped", "runs"};

/* One run of a history row, checked and put in canonical form. */
static int normalize_run(body_ctx *c, dw_json *run) {
    unsigned long seen = 0;
    int slot[4] = {-1, -1, -1, -1};
    size_t i;
    uint64_t u = 0;
    if (run->kind != DW_JOBJECT) return body_fail(c, "invalid type for `%s`: expected %s", "runs", "an object");
    for (i = 0; i < run->u.obj.len; i++) {
        const dw_member *m = &run->u.obj.members[i];
        int k = key_index(&m->key, RUN_KEYS, 4), keep = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, RUN_KEYS[k]) != 0) return -1;
        if (k == 0) {
            if (m->value.kind != DW_JSTRING) return body_fail(c, "invalid type for `%s`: expected %s", "text", "a string");
            keep = 1;
        } else if (k == 1 || k == 2) {
            if (check_color(c, &m->value, RUN_KEYS[k], &keep) != 0) return -1;
        } else {
            if (want_uint(c, &m->value, "flags", 0xffffu, &u) != 0) return -1;
            keep = u != 0;
        }
        if (keep) slot[k] = (int)i;
    }
    if (check_missing(c, seen, RUN_KEYS, 4, 0xeul) != 0) return -1;
    return rebuild_object(c, run, slot, 4);
}

/* One history row, checked and put in canonical form. */
static int normalize_row(body_ctx *c, dw_json *row) {
    unsigned long seen = 0;
    int slot[3] = {-1, -1, -1};
    size_t i, j;
    if (row->kind != DW_JOBJECT) return body_fail(c, "invalid type for `%s`: expected %s", "history", "an array of objects");
    for (i = 0; i < row->u.obj.len; i++) {
        dw_member *m = &row->u.obj.members[i];
        int k = key_index(&m->key, ROW_KEYS, 3), flag = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, ROW_KEYS[k]) != 0) return -1;
        if (k == 0) {
            if (m->value.kind != DW_JSTRING) return body_fail(c, "invalid type for `%s`: expected %s", "text", "a string");
            slot[0] = (int)i;
        } else if (k == 1) {
            if (want_bool(c, &m->value, "wrapped", &flag) != 0) return -1;
            if (flag) slot[1] = (int)i;
        } else {
            if (m->value.kind != DW_JARRAY) return body_fail(c, "invalid type for `%s`: expected %s", "runs", "an array");
            for (j = 0; j < m->value.u.arr.len; j++)
                if (normalize_run(c, &m->value.u.arr.items[j]) != 0) return -1;
            if (m->value.u.arr.len) slot[2] = (int)i;
        }
    }
    if (check_missing(c, seen, ROW_KEYS, 3, 0x6ul) != 0) return -1;
    return rebuild_object(c, row, slot, 3);
}

static int key_index(const dw_str *key, const char *const *keys, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (strlen(keys[i]) == key->len && memcmp(keys[i], key->ptr, key->len) == 0) return i;
    return -1;
}

static const char *const INFO_KEYS[] = {"name",        "generation", "provider", "pid",       "master_pid",
                                        "command",     "cwd",        "cols",     "rows",      "controllers",
                                        "viewers",     "observers",  "title",    "started_at_ms", "state"};

static void free_strs(dw_str *s, size_t n) {
    size_t i;
    if (!s) return;
    for (i = 0; i < n; i++) free(s[i].ptr);
    free(s);
}

static void free_state(dw_json *state) {
    if (state) {
        dw_json_free(state);
        free(state);
    }
}

static void info_free(dw_session_info *info) {
    if (!info) return;
    free(info->name.ptr);
    free(info->provider.ptr);
    free_strs(info->command, info->command_len);
    free(info->cwd.ptr);
    free(info->title.ptr);
    free_state(info->state);
    free(info);
}

static int read_info(body_ctx *c, dw_json *obj, dw_session_info *info) {
    unsigned long seen = 0;
    size_t i;
    uint64_t u;
    for (i = 0; i < obj->u.obj.len; i++) {
        dw_member *m = &obj->u.obj.members[i];
        int k = key_index(&m->key, INFO_KEYS, (int)COUNT(INFO_KEYS));
        int rc = 0;
        if (k < 0) continue; /* unknown keys are ignored */
        if (mark_seen(c, &seen, k, INFO_KEYS[k]) != 0) return -1;
        switch (k) {
        case 0: rc = take_string(c, &m->value, "name", &info->name); break;
        case 1: rc = want_uint(c, &m->value, "generation", 0xffffffffu, &u); info->generation = (uint32_t)u; break;
        case 2: rc = take_string(c, &m->value, "provider", &info->provider); break;
        case 3: rc = want_uint(c, &m->value, "pid", 0xffffffffu, &u); info->pid = (uint32_t)u; break;
        case 4: rc = want_uint(c, &m->value, "master_pid", 0xffffffffu, &u); info->master_pid = (uint32_t)u; break;
        case 5: rc = take_strings(c, &m->value, "command", &info->command, &info->command_len); break;
        case 6: rc = take_string(c, &m->value, "cwd", &info->cwd); break;
        case 7: rc = want_uint(c, &m->value, "cols", 0xffffu, &u); info->cols = (uint16_t)u; break;
        case 8: rc = want_uint(c, &m->value, "rows", 0xffffu, &u); info->rows = (uint16_t)u; break;
        case 9: rc = want_uint(c, &m->value, "controllers", 0xffffffffu, &u); info->controllers = (uint32_t)u; break;
        case 10: rc = want_uint(c, &m->value, "viewers", 0xffffffffu, &u); info->viewers = (uint32_t)u; break;
        case 11: rc = want_uint(c, &m->value, "observers", 0xffffffffu, &u); info->observers = (uint32_t)u; break;
        case 12: rc = take_string(c, &m->value, "title", &info->title); break;
        case 13: rc = want_uint(c, &m->value, "started_at_ms", UINT64_MAX, &u); info->started_at_ms = u; break;
        case 14: rc = take_state(c, &m->value, &info->state); break;
        }
        if (rc != 0) return -1;
    }
    return check_missing(c, seen, INFO_KEYS, (int)COUNT(INFO_KEYS), 1ul << 14);
}

static const char *const SNAP_KEYS[] = {"cols",  "rows",       "cursor",        "title",     "modes",
                                        "lines", "generation", "last_input_ms", "canonical", "state",
                                        "history", "history_start", "history_first", "history_end", "foreground"};
static const char *const FOREGROUND_KEYS[] = {"pgid", "program", "own", "reading"};
static const char *const CURSOR_KEYS[] = {"row", "col", "visible"};
static const char *const MODE_KEYS[] = {"alternate_screen", "bracketed_paste", "app_cursor_keys", "app_keypad",
                                        "cursor_visible",   "autowrap",        "origin",          "insert",
                                        "mouse",            "mouse_encoding",  "focus_events"};

static void snapshot_free(dw_snapshot *s) {
    if (!s) return;
    free(s->title.ptr);
    free_strs(s->lines, s->lines_len);
    free_state(s->state);
    free_state(s->history);
    free(s->fg_program.ptr);
    free(s);
}

static int want_object(body_ctx *c, const dw_json *v, const char *key) {
    if (v->kind != DW_JOBJECT) return body_fail(c, "invalid type for `%s`: expected %s", key, "an object");
    return 0;
}

static int want_variant(body_ctx *c, const dw_json *v, const char *key, const char *const *names, int n, int *out) {
    int i;
    if (v->kind != DW_JSTRING) return body_fail(c, "invalid type for `%s`: expected %s", key, "a string");
    for (i = 0; i < n; i++)
        if (strlen(names[i]) == v->u.str.len && memcmp(names[i], v->u.str.ptr, v->u.str.len) == 0) {
            *out = i;
            return 0;
        }
    return body_fail(c, "unknown variant `%s` for `%s`", v->u.str.ptr, key);
}

static int read_cursor(body_ctx *c, const dw_json *obj, dw_snapshot *s) {
    unsigned long seen = 0;
    size_t i;
    uint64_t u;
    if (want_object(c, obj, "cursor") != 0) return -1;
    for (i = 0; i < obj->u.obj.len; i++) {
        const dw_member *m = &obj->u.obj.members[i];
        int k = key_index(&m->key, CURSOR_KEYS, 3), rc = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, CURSOR_KEYS[k]) != 0) return -1;
        if (k == 0) { rc = want_uint(c, &m->value, "row", 0xffffu, &u); s->cursor_row = (uint16_t)u; }
        if (k == 1) { rc = want_uint(c, &m->value, "col", 0xffffu, &u); s->cursor_col = (uint16_t)u; }
        if (k == 2) rc = want_bool(c, &m->value, "visible", &s->cursor_shown);
        if (rc != 0) return -1;
    }
    return check_missing(c, seen, CURSOR_KEYS, 3, 0);
}

/* `foreground`: `pgid`, `program` and `own` required; `reading` a bool, or null or left out
 * (not known). */
static int read_foreground(body_ctx *c, dw_json *obj, dw_snapshot *s) {
    unsigned long seen = 0;
    size_t i;
    uint64_t u;
    if (want_object(c, obj, "foreground") != 0) return -1;
    s->fg_reading = -1;
    for (i = 0; i < obj->u.obj.len; i++) {
        dw_member *m = &obj->u.obj.members[i];
        int k = key_index(&m->key, FOREGROUND_KEYS, 4), rc = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, FOREGROUND_KEYS[k]) != 0) return -1;
        if (k == 0) { rc = want_uint(c, &m->value, "pgid", 0xffffffffu, &u); s->fg_pgid = (uint32_t)u; }
        if (k == 1) rc = take_string(c, &m->value, "program", &s->fg_program);
        if (k == 2) rc = want_bool(c, &m->value, "own", &s->fg_own);
        if (k == 3 && m->value.kind != DW_JNULL) rc = want_bool(c, &m->value, "reading", &s->fg_reading);
        if (rc != 0) return -1;
    }
    s->has_foreground = 1;
    return check_missing(c, seen, FOREGROUND_KEYS, 4, 1ul << 3);
}

static int read_modes(body_ctx *c, const dw_json *obj, dw_snapshot *s) {
    unsigned long seen = 0;
    size_t i;
    int *flags[11];
    if (want_object(c, obj, "modes") != 0) return -1;
    flags[0] = &s->modes.alternate_screen;
    flags[1] = &s->modes.bracketed_paste;
    flags[2] = &s->modes.app_cursor_keys;
    flags[3] = &s->modes.app_keypad;
    flags[4] = &s->modes.cursor_visible;
    flags[5] = &s->modes.autowrap;
    flags[6] = &s->modes.origin;
    flags[7] = &s->modes.insert;
    flags[10] = &s->modes.focus_events;
    for (i = 0; i < obj->u.obj.len; i++) {
        const dw_member *m = &obj->u.obj.members[i];
        int k = key_index(&m->key, MODE_KEYS, 11), rc, variant = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, MODE_KEYS[k]) != 0) return -1;
        if (k == 8) {
            rc = want_variant(c, &m->value, "mouse", MOUSE_NAMES, (int)COUNT(MOUSE_NAMES), &variant);
            s->modes.mouse = (enum dw_mouse)variant;
        } else if (k == 9) {
            rc = want_variant(c, &m->value, "mouse_encoding", MOUSE_ENC_NAMES, (int)COUNT(MOUSE_ENC_NAMES), &variant);
            s->modes.mouse_encoding = (enum dw_mouse_encoding)variant;
        } else {
            rc = want_bool(c, &m->value, MODE_KEYS[k], flags[k]);
        }
        if (rc != 0) return -1;
    }
    return check_missing(c, seen, MODE_KEYS, 11, 0);
}

static int read_snapshot(body_ctx *c, dw_json *obj, dw_snapshot *s) {
    unsigned long seen = 0;
    size_t i;
    uint64_t u;
    for (i = 0; i < obj->u.obj.len; i++) {
        dw_member *m = &obj->u.obj.members[i];
        int k = key_index(&m->key, SNAP_KEYS, (int)COUNT(SNAP_KEYS)), rc = 0;
        if (k < 0) continue;
        if (mark_seen(c, &seen, k, SNAP_KEYS[k]) != 0) return -1;
        switch (k) {
        case 0: rc = want_uint(c, &m->value, "cols", 0xffffu, &u); s->cols = (uint16_t)u; break;
        case 1: rc = want_uint(c, &m->value, "rows", 0xffffu, &u); s->rows = (uint16_t)u; break;
        case 2: rc = read_cursor(c, &m->value, s); break;
        case 3: rc = take_string(c, &m->value, "title", &s->title); break;
        case 4: rc = read_modes(c, &m->value, s); break;
        case 5: rc = take_strings(c, &m->value, "lines", &s->lines, &s->lines_len); break;
        case 6: rc = want_uint(c, &m->value, "generation", 0xffffffffu, &u); s->generation = (uint32_t)u; break;
        case 7:
            if (m->value.kind == DW_JNULL) break;
            rc = want_uint(c, &m->value, "last_input_ms", UINT64_MAX, &s->last_input_ms);
            s->has_last_input = 1;
            break;
        case 8: rc = want_bool(c, &m->value, "canonical", &s->canonical); break;
        case 9: rc = take_state(c, &m->value, &s->state); break;
        case 10:
            /* `history`: an array kept as received; null means absent. */
            if (m->value.kind == DW_JNULL) break;
            if (m->value.kind != DW_JARRAY) {
                rc = body_fail(c, "invalid type for `%s`: expected %s", "history", "an array");
                break;
            }
            {
                size_t j;
                for (j = 0; j < m->value.u.arr.len && rc == 0; j++) rc = normalize_row(c, &m->value.u.arr.items[j]);
            }
            if (rc != 0) break;
            s->history = malloc(sizeof *s->history);
            if (!s->history) return fail(c->err, DW_MALFORMED, "out of memory");
            *s->history = m->value;
            m->value.kind = DW_JNULL;
            break;
        case 11:
            rc = want_uint(c, &m->value, "history_start", UINT64_MAX, &s->history_start);
            s->has_history_start = 1;
            break;
        case 12:
            rc = want_uint(c, &m->value, "history_first", UINT64_MAX, &s->history_first);
            s->has_history_first = 1;
            break;
        case 13:
            rc = want_uint(c, &m->value, "history_end", UINT64_MAX, &s->history_end);
            s->has_history_end = 1;
            break;
        case 14:
            /* `foreground`: null means absent. */
            if (m->value.kind != DW_JNULL) rc = read_foreground(c, &m->value, s);
            break;
        }
        if (rc != 0) return -1;
    }
    /* generation, last_input_ms, canonical, state, history, the history's numbers and foreground
     * may be left out (0, null, false, absent, absent, absent, absent). */
    return check_missing(c, seen, SNAP_KEYS, (int)COUNT(SNAP_KEYS),
                         (1ul << 6) | (1ul << 7) | (1ul << 8) | (1ul << 9) | (1ul << 10) | (1ul << 11) | (1ul << 12) |
                             (1ul << 13) | (1ul << 14));
}

/* The checks every JSON body gets: starts with '{' after whitespace, parses. */
static int parse_body(const char *frame, const uint8_t *p, size_t n, enum dw_json_mode mode, dw_json *out, dw_error *err) {
    size_t i = 0;
    dw_error inner;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
    if (i == n || p[i] != '{') return fail(err, DW_MALFORMED, "malformed %s frame: body is not a JSON object", frame);
    if (dw_json_parse(p, n, mode, out, &inner) != 0)
        return fail(err, DW_MALFORMED, "malformed %s frame: " BODY_ERROR "%s", frame, inner.message);
    return 0;
}

/* ---- frames: decoding -------------------------------------------------------------------- */

int dw_decode_header(const uint8_t h[8], uint32_t *len, int *type, uint8_t *flags, dw_error *err) {
    uint32_t length = get_u32(h);
    uint16_t reserved = get_u16(h + 6);
    uint8_t allowed;
    const char *name = dw_type_name(h[4]);
    if (!name) return fail(err, DW_UNKNOWN_TYPE, "unknown frame type 0x%02x", (unsigned)h[4]);
    if (length > DW_MAX_PAYLOAD)
        return fail(err, DW_TOO_LARGE, "frame declares a %lu-byte payload; the limit is %lu bytes", (unsigned long)length,
                    (unsigned long)DW_MAX_PAYLOAD);
    allowed = h[4] == DW_KEYFRAME ? DW_FLAG_MORE : 0;
    if ((h[5] & (uint8_t)~allowed) != 0 || reserved != 0)
        return fail(err, DW_MALFORMED, "%s frame has reserved bits set (flags 0x%02x, reserved 0x%04x)", name, (unsigned)h[5],
                    (unsigned)reserved);
    *len = length;
    *type = h[4];
    *flags = h[5];
    return 0;
}

static int exact(int type, size_t len, size_t want, dw_error *err) {
    if (len == want) return 0;
    return fail(err, type == DW_HELLO ? DW_BAD_HELLO : DW_MALFORMED, "malformed %s frame: payload is %lu bytes, expected %lu",
                dw_type_name(type), (unsigned long)len, (unsigned long)want);
}

static int valid_size(unsigned cols, unsigned rows) {
    return cols >= 1 && cols <= 1000 && rows >= 1 && rows <= 1000 && (unsigned long)cols * rows <= 200000ul;
}

void dw_frame_free(dw_frame *f) {
    if (!f) return;
    switch (f->type) {
    case DW_WELCOME:
        info_free(f->u.welcome.info);
        f->u.welcome.info = NULL;
        break;
    case DW_SNAPSHOT:
        snapshot_free(f->u.snapshot);
        f->u.snapshot = NULL;
        break;
    case DW_EVENT:
    case DW_HOOK:
        free_state(f->u.body);
        f->u.body = NULL;
        break;
    default:
        break;
    }
}

static int decode_json_frame(int type, const uint8_t *p, size_t n, dw_frame *out, dw_error *err) {
    const char *name = dw_type_name(type);
    dw_json *body = malloc(sizeof *body);
    body_ctx c;
    int rc = 0;
    if (!body) return fail(err, DW_MALFORMED, "out of memory");
    c.frame = name;
    c.err = err;
    if (parse_body(name, p, n, type == DW_EVENT || type == DW_HOOK ? DW_JSON_SORTED : DW_JSON_RAW, body, err) != 0) {
        free(body);
        return -1;
    }
    if (type == DW_EVENT || type == DW_HOOK) {
        out->u.body = body;
        return 0;
    }
    if (type == DW_WELCOME) {
        dw_session_info *info = calloc(1, sizeof *info);
        if (!info) rc = fail(err, DW_MALFORMED, "out of memory");
        else if (read_info(&c, body, info) != 0) { info_free(info); rc = -1; }
        else out->u.welcome.info = info;
    } else {
        dw_snapshot *s = calloc(1, sizeof *s);
        if (!s) rc = fail(err, DW_MALFORMED, "out of memory");
        else if (read_snapshot(&c, body, s) != 0) { snapshot_free(s); rc = -1; }
        else out->u.snapshot = s;
    }
    dw_json_free(body);
    free(body);
    return rc;
}

int dw_decode_payload(int type, uint8_t flags, const uint8_t *p, size_t n, dw_frame *out, dw_error *err) {
    memset(out, 0, sizeof *out);
    out->type = type;
    switch (type) {
    case DW_HELLO:
        if (exact(type, n, 12, err) != 0) return -1;
        if (memcmp(p, "DESK", 4) != 0) return fail(err, DW_BAD_HELLO, "malformed HELLO frame: bad magic (not a desk client)");
        if (!dw_role_name(p[6])) return fail(err, DW_BAD_HELLO, "malformed HELLO frame: unknown role %u", (unsigned)p[6]);
        if ((p[7] & ~(DW_HELLO_STATUS_LINE | DW_HELLO_VIEW)) != 0)
            return fail(err, DW_BAD_HELLO, "malformed HELLO frame: reserved option bits are set (0x%02x)", (unsigned)p[7]);
        out->u.hello.status_line = (p[7] & DW_HELLO_STATUS_LINE) != 0;
        out->u.hello.view = (p[7] & DW_HELLO_VIEW) != 0;
        out->u.hello.version = get_u16(p + 4);
        out->u.hello.role = p[6];
        out->u.hello.cols = get_u16(p + 8);
        out->u.hello.rows = get_u16(p + 10);
        return 0;
    case DW_WELCOME:
        if (n < 4) return fail(err, DW_MALFORMED, "malformed WELCOME frame: shorter than its 4-byte prefix");
        if (get_u16(p + 2) != 0) return fail(err, DW_MALFORMED, "malformed WELCOME frame: reserved field is not zero");
        out->u.welcome.version = get_u16(p);
        return decode_json_frame(type, p + 4, n - 4, out, err);
    case DW_INPUT:
    case DW_OUTPUT:
        out->u.data.ptr = p;
        out->u.data.len = n;
        return 0;
    case DW_RESIZE:
        if (exact(type, n, 4, err) != 0) return -1;
        out->u.resize.cols = get_u16(p);
        out->u.resize.rows = get_u16(p + 2);
        if (!valid_size(out->u.resize.cols, out->u.resize.rows))
            return fail(err, DW_MALFORMED, "malformed RESIZE frame: size %ux%u is out of range", (unsigned)out->u.resize.cols,
                        (unsigned)out->u.resize.rows);
        return 0;
    case DW_KEYFRAME:
        out->u.keyframe.more = (flags & DW_FLAG_MORE) != 0;
        out->u.keyframe.data.ptr = p;
        out->u.keyframe.data.len = n;
        return 0;
    case DW_SNAPSHOT_REQUEST:
        if (n == 4 || n == 12) {
            out->u.snapshot_request.has_history = 1;
            out->u.snapshot_request.history = get_u32(p);
            if (n == 12) {
                out->u.snapshot_request.has_from = 1;
                out->u.snapshot_request.from = get_u64(p + 4);
            }
            return 0;
        }
        if (n == 0) return 0;
        return fail(err, DW_MALFORMED, "malformed %s frame: payload is %lu bytes, expected 0, 4 or 12", dw_type_name(type),
                    (unsigned long)n);
    case DW_DETACH:
        return exact(type, n, 0, err);
    case DW_SNAPSHOT:
    case DW_EVENT:
    case DW_HOOK:
        return decode_json_frame(type, p, n, out, err);
    case DW_EXIT: {
        int32_t value;
        if (exact(type, n, 6, err) != 0) return -1;
        value = i32_from_bits(get_u32(p + 1));
        if (p[0] > 1) return fail(err, DW_MALFORMED, "malformed EXIT frame: unknown exit kind %u", (unsigned)p[0]);
        if (p[0] == 1 && (value < 1 || value > 64))
            return fail(err, DW_MALFORMED, "malformed EXIT frame: signal %ld is out of range", (long)value);
        if (p[5] > 1) return fail(err, DW_MALFORMED, "malformed EXIT frame: escalated flag is %u", (unsigned)p[5]);
        out->u.exit.signaled = p[0];
        out->u.exit.value = value;
        out->u.exit.escalated = p[5];
        return 0;
    }
    case DW_ERROR: {
        uint16_t code;
        if (n < 2) return fail(err, DW_MALFORMED, "malformed ERROR frame: shorter than its 2-byte code");
        if (n - 2 > DW_MAX_ERROR_MESSAGE) return fail(err, DW_MALFORMED, "malformed ERROR frame: message is longer than the limit");
        code = get_u16(p);
        if (!dw_code_name(code)) return fail(err, DW_MALFORMED, "malformed ERROR frame: unknown error code %u", (unsigned)code);
        if (!dw_utf8_valid(p + 2, n - 2)) return fail(err, DW_MALFORMED, "malformed ERROR frame: message is not UTF-8");
        out->u.error.code = code;
        out->u.error.message.ptr = p + 2;
        out->u.error.message.len = n - 2;
        return 0;
    }
    case DW_PING:
    case DW_PONG:
        if (exact(type, n, 8, err) != 0) return -1;
        out->u.nonce = get_u64(p);
        return 0;
    case DW_SIGNAL:
        if (exact(type, n, 5, err) != 0) return -1;
        if (p[0] < 1 || p[0] > 64) return fail(err, DW_MALFORMED, "malformed SIGNAL frame: signal %u is out of range", (unsigned)p[0]);
        out->u.signal.signal = p[0];
        out->u.signal.grace_ms = get_u32(p + 1);
        return 0;
    case DW_TERMINAL:
        if (n == 0) return fail(err, DW_MALFORMED, "malformed TERMINAL frame: empty payload (no op byte)");
        if (p[0] < 1 || p[0] > 6) return fail(err, DW_MALFORMED, "malformed TERMINAL frame: unknown op %u", (unsigned)p[0]);
        if ((p[0] == 2 || p[0] == 3 || p[0] == 6) && n > 1)
            return fail(err, DW_MALFORMED, "malformed TERMINAL frame: op %u carries no bytes", (unsigned)p[0]);
        if (p[0] == 1 && n - 1 > 8) return fail(err, DW_MALFORMED, "malformed TERMINAL frame: more than 8 keys to give the terminal back on");
        out->u.terminal.op = p[0];
        out->u.terminal.data.ptr = p + 1;
        out->u.terminal.data.len = n - 1;
        return 0;
    default:
        return fail(err, DW_UNKNOWN_TYPE, "unknown frame type 0x%02x", (unsigned)type);
    }
}

/* ---- the decoder ------------------------------------------------------------------------- */

void dw_decoder_init(dw_decoder *dec) { memset(dec, 0, sizeof *dec); }

void dw_decoder_free(dw_decoder *dec) {
    free(dec->buf);
    dw_decoder_init(dec);
}

size_t dw_decoder_buffered(const dw_decoder *dec) { return dec->len - dec->start; }

static void compact(dw_decoder *dec) {
    if (dec->start == 0) return;
    memmove(dec->buf, dec->buf + dec->start, dec->len - dec->start);
    dec->len -= dec->start;
    dec->start = 0;
}

int dw_decoder_push(dw_decoder *dec, const void *bytes, size_t n) {
    size_t need;
    if (dec->start > 0 && dec->start == dec->len) dec->start = dec->len = 0;
    if (n == 0) return 0;
    if (n > (size_t)-1 - dec->len) return -1;
    need = dec->len + n;
    if (need > dec->cap) {
        size_t cap = dec->cap ? dec->cap : 4096;
        uint8_t *grown;
        compact(dec);
        need = dec->len + n;
        while (cap < need) cap = cap > (size_t)-1 / 2 ? need : cap * 2;
        grown = realloc(dec->buf, cap);
        if (!grown) return -1;
        dec->buf = grown;
        dec->cap = cap;
    }
    memcpy(dec->buf + dec->len, bytes, n);
    dec->len += n;
    return 0;
}

int dw_decoder_next(dw_decoder *dec, dw_frame *out, dw_error *err) {
    size_t pending = dec->len - dec->start;
    uint32_t len;
    int type;
    uint8_t flags;
    const uint8_t *head;
    if (dec->failed) {
        if (err) *err = dec->error;
        return -1;
    }
    if (pending < DW_HEADER_LEN) {
        compact(dec);
        return 0;
    }
    head = dec->buf + dec->start;
    if (dw_decode_header(head, &len, &type, &flags, &dec->error) != 0) {
        dec->failed = 1;
        if (err) *err = dec->error;
        return -1;
    }
    if (pending - DW_HEADER_LEN < len) {
        compact(dec);
        return 0;
    }
    if (dw_decode_payload(type, flags, head + DW_HEADER_LEN, len, out, &dec->error) != 0) {
        dec->failed = 1;
        if (err) *err = dec->error;
        return -1;
    }
    dec->start += DW_HEADER_LEN + len;
    return 1;
}

/* ---- frames: encoding -------------------------------------------------------------------- */

static int put_key(dw_buf *b, const char *key, int first) {
    if (!first && buf_byte(b, ',') != 0) return -1;
    if (buf_byte(b, '"') != 0 || buf_str(b, key) != 0) return -1;
    return buf_str(b, "\":");
}

static int put_str_field(dw_buf *b, const char *key, const dw_str *s, dw_error *err) {
    return put_key(b, key, 0) != 0 || write_string(b, s->ptr ? s->ptr : "", s->ptr ? s->len : 0, err) != 0 ? -1 : 0;
}

static int put_uint_field(dw_buf *b, const char *key, uint64_t v, int first) {
    return put_key(b, key, first) != 0 || write_uint(b, v) != 0 ? -1 : 0;
}

static int put_bool_field(dw_buf *b, const char *key, int v, int first) {
    return put_key(b, key, first) != 0 || buf_str(b, v ? "true" : "false") != 0 ? -1 : 0;
}

static int put_strs_field(dw_buf *b, const char *key, const dw_str *s, size_t n, dw_error *err) {
    size_t i;
    if (put_key(b, key, 0) != 0 || buf_byte(b, '[') != 0) return -1;
    for (i = 0; i < n; i++) {
        if (i && buf_byte(b, ',') != 0) return -1;
        if (write_string(b, s[i].ptr ? s[i].ptr : "", s[i].ptr ? s[i].len : 0, err) != 0) return -1;
    }
    return buf_byte(b, ']');
}

static int put_state(dw_buf *b, const dw_json *state, dw_error *err) {
    if (!state) return 0;
    if (state->kind != DW_JOBJECT) return fail(err, DW_MALFORMED, "cannot encode: `state` must be an object");
    return put_key(b, "state", 0) != 0 || write_json(b, state, err) != 0 ? -1 : 0;
}

static int encode_info(dw_buf *b, const dw_session_info *i, dw_error *err) {
    if (buf_byte(b, '{') != 0 || put_key(b, "name", 1) != 0 || write_string(b, i->name.ptr ? i->name.ptr : "", i->name.len, err) != 0)
        return -1;
    if (put_uint_field(b, "generation", i->generation, 0) || put_str_field(b, "provider", &i->provider, err) ||
        put_uint_field(b, "pid", i->pid, 0) || put_uint_field(b, "master_pid", i->master_pid, 0) ||
        put_strs_field(b, "command", i->command, i->command_len, err) || put_str_field(b, "cwd", &i->cwd, err) ||
        put_uint_field(b, "cols", i->cols, 0) || put_uint_field(b, "rows", i->rows, 0) ||
        put_uint_field(b, "controllers", i->controllers, 0) || put_uint_field(b, "viewers", i->viewers, 0) ||
        put_uint_field(b, "observers", i->observers, 0) || put_str_field(b, "title", &i->title, err) ||
        put_uint_field(b, "started_at_ms", i->started_at_ms, 0) || put_state(b, i->state, err))
        return -1;
    return buf_byte(b, '}');
}

static int encode_snapshot(dw_buf *b, const dw_snapshot *s, dw_error *err) {
    if ((unsigned)s->modes.mouse >= COUNT(MOUSE_NAMES) || (unsigned)s->modes.mouse_encoding >= COUNT(MOUSE_ENC_NAMES))
        return fail(err, DW_MALFORMED, "cannot encode SNAPSHOT: unknown mouse mode or encoding");
    if (buf_byte(b, '{') || put_uint_field(b, "cols", s->cols, 1) || put_uint_field(b, "rows", s->rows, 0) ||
        put_key(b, "cursor", 0) || buf_byte(b, '{') || put_uint_field(b, "row", s->cursor_row, 1) ||
        put_uint_field(b, "col", s->cursor_col, 0) || put_bool_field(b, "visible", s->cursor_shown, 0) || buf_byte(b, '}') ||
        put_str_field(b, "title", &s->title, err) || put_key(b, "modes", 0) || buf_byte(b, '{') ||
        put_bool_field(b, "alternate_screen", s->modes.alternate_screen, 1) ||
        put_bool_field(b, "bracketed_paste", s->modes.bracketed_paste, 0) ||
        put_bool_field(b, "app_cursor_keys", s->modes.app_cursor_keys, 0) ||
        put_bool_field(b, "app_keypad", s->modes.app_keypad, 0) ||
        put_bool_field(b, "cursor_visible", s->modes.cursor_visible, 0) || put_bool_field(b, "autowrap", s->modes.autowrap, 0) ||
        put_bool_field(b, "origin", s->modes.origin, 0) || put_bool_field(b, "insert", s->modes.insert, 0) ||
        put_key(b, "mouse", 0) || buf_byte(b, '"') || buf_str(b, MOUSE_NAMES[s->modes.mouse]) || buf_byte(b, '"') ||
        put_key(b, "mouse_encoding", 0) || buf_byte(b, '"') || buf_str(b, MOUSE_ENC_NAMES[s->modes.mouse_encoding]) ||
        buf_byte(b, '"') || put_bool_field(b, "focus_events", s->modes.focus_events, 0) || buf_byte(b, '}') ||
        put_strs_field(b, "lines", s->lines, s->lines_len, err) || put_uint_field(b, "generation", s->generation, 0) ||
        put_key(b, "last_input_ms", 0) || (s->has_last_input ? write_uint(b, s->last_input_ms) : buf_str(b, "null")) ||
        put_bool_field(b, "canonical", s->canonical, 0) || put_state(b, s->state, err))
        return -1;
    if (s->history && (put_key(b, "history", 0) != 0 || write_json(b, s->history, err) != 0)) return -1;
    if ((s->has_history_start && put_uint_field(b, "history_start", s->history_start, 0)) ||
        (s->has_history_first && put_uint_field(b, "history_first", s->history_first, 0)) ||
        (s->has_history_end && put_uint_field(b, "history_end", s->history_end, 0)))
        return -1;
    if (s->has_foreground &&
        (put_key(b, "foreground", 0) || buf_byte(b, '{') || put_uint_field(b, "pgid", s->fg_pgid, 1) ||
         put_str_field(b, "program", &s->fg_program, err) || put_bool_field(b, "own", s->fg_own, 0) ||
         put_key(b, "reading", 0) || buf_str(b, s->fg_reading < 0 ? "null" : s->fg_reading ? "true" : "false") ||
         buf_byte(b, '}')))
        return -1;
    return buf_byte(b, '}');
}

static int encode_payload(const dw_frame *f, dw_buf *p, uint8_t *flags, dw_error *err) {
    uint8_t fixed[12];
    *flags = 0;
    switch (f->type) {
    case DW_HELLO:
        if (!dw_role_name(f->u.hello.role)) return fail(err, DW_MALFORMED, "cannot encode HELLO: unknown role %u", (unsigned)f->u.hello.role);
        memcpy(fixed, "DESK", 4);
        put_u16(fixed + 4, f->u.hello.version);
        fixed[6] = f->u.hello.role;
        fixed[7] = (uint8_t)((f->u.hello.status_line ? DW_HELLO_STATUS_LINE : 0) | (f->u.hello.view ? DW_HELLO_VIEW : 0));
        put_u16(fixed + 8, f->u.hello.cols);
        put_u16(fixed + 10, f->u.hello.rows);
        return dw_buf_append(p, fixed, 12);
    case DW_WELCOME:
        if (!f->u.welcome.info) return fail(err, DW_MALFORMED, "cannot encode WELCOME without its SessionInfo");
        put_u16(fixed, f->u.welcome.version);
        put_u16(fixed + 2, 0);
        return dw_buf_append(p, fixed, 4) || encode_info(p, f->u.welcome.info, err) ? -1 : 0;
    case DW_INPUT:
    case DW_OUTPUT:
        return dw_buf_append(p, f->u.data.ptr, f->u.data.len);
    case DW_RESIZE:
        if (!valid_size(f->u.resize.cols, f->u.resize.rows))
            return fail(err, DW_MALFORMED, "cannot encode RESIZE: size %ux%u is out of range", (unsigned)f->u.resize.cols,
                        (unsigned)f->u.resize.rows);
        put_u16(fixed, f->u.resize.cols);
        put_u16(fixed + 2, f->u.resize.rows);
        return dw_buf_append(p, fixed, 4);
    case DW_KEYFRAME:
        *flags = f->u.keyframe.more ? DW_FLAG_MORE : 0;
        return dw_buf_append(p, f->u.keyframe.data.ptr, f->u.keyframe.data.len);
    case DW_SNAPSHOT_REQUEST:
        if (!f->u.snapshot_request.has_history) return 0;
        put_u32(fixed, f->u.snapshot_request.history);
        if (!f->u.snapshot_request.has_from) return dw_buf_append(p, fixed, 4);
        put_u64(fixed + 4, f->u.snapshot_request.from);
        return dw_buf_append(p, fixed, 12);
    case DW_DETACH:
        return 0;
    case DW_SNAPSHOT:
        if (!f->u.snapshot) return fail(err, DW_MALFORMED, "cannot encode SNAPSHOT without its body");
        return encode_snapshot(p, f->u.snapshot, err);
    case DW_EVENT:
    case DW_HOOK:
        if (!f->u.body || f->u.body->kind != DW_JOBJECT)
            return fail(err, DW_MALFORMED, "cannot encode %s: the body must be a JSON object", dw_type_name(f->type));
        return write_json(p, f->u.body, err);
    case DW_EXIT:
        if (f->u.exit.signaled && (f->u.exit.value < 1 || f->u.exit.value > 64))
            return fail(err, DW_MALFORMED, "cannot encode EXIT: signal %ld is out of range", (long)f->u.exit.value);
        fixed[0] = f->u.exit.signaled ? 1 : 0;
        put_u32(fixed + 1, i32_to_bits(f->u.exit.value));
        fixed[5] = f->u.exit.escalated ? 1 : 0;
        return dw_buf_append(p, fixed, 6);
    case DW_ERROR:
        if (!dw_code_name(f->u.error.code)) return fail(err, DW_MALFORMED, "cannot encode ERROR: unknown error code %u", (unsigned)f->u.error.code);
        if (f->u.error.message.len > DW_MAX_ERROR_MESSAGE)
            return fail(err, DW_MALFORMED, "cannot encode ERROR: the message is %lu bytes; the limit is %u",
                        (unsigned long)f->u.error.message.len, DW_MAX_ERROR_MESSAGE);
        if (!dw_utf8_valid(f->u.error.message.ptr, f->u.error.message.len))
            return fail(err, DW_MALFORMED, "cannot encode ERROR: the message is not UTF-8");
        put_u16(fixed, f->u.error.code);
        return dw_buf_append(p, fixed, 2) || dw_buf_append(p, f->u.error.message.ptr, f->u.error.message.len) ? -1 : 0;
    case DW_PING:
    case DW_PONG:
        put_u64(fixed, f->u.nonce);
        return dw_buf_append(p, fixed, 8);
    case DW_SIGNAL:
        if (f->u.signal.signal < 1 || f->u.signal.signal > 64)
            return fail(err, DW_MALFORMED, "cannot encode SIGNAL: signal %u is out of range", (unsigned)f->u.signal.signal);
        fixed[0] = f->u.signal.signal;
        put_u32(fixed + 1, f->u.signal.grace_ms);
        return dw_buf_append(p, fixed, 5);
    case DW_TERMINAL:
        if (f->u.terminal.op < 1 || f->u.terminal.op > 6)
            return fail(err, DW_MALFORMED, "cannot encode TERMINAL: unknown op %u", (unsigned)f->u.terminal.op);
        fixed[0] = f->u.terminal.op;
        return dw_buf_append(p, fixed, 1) || dw_buf_append(p, f->u.terminal.data.ptr, f->u.terminal.data.len) ? -1 : 0;
    default:
        return fail(err, DW_MALFORMED, "cannot encode unknown frame type 0x%02x", (unsigned)f->type);
    }
}

int dw_encode(const dw_frame *frame, dw_buf *out, dw_error *err) {
    dw_buf payload = {NULL, 0, 0};
    uint8_t header[8], flags;
    size_t before;
    if (err) err->code = 0;
    if (encode_payload(frame, &payload, &flags, err) != 0) {
        dw_buf_free(&payload);
        if (!err || err->code == 0) return fail(err, DW_MALFORMED, "out of memory");
        return -1;
    }
    if (payload.len > DW_MAX_PAYLOAD) {
        dw_buf_free(&payload);
        return fail(err, DW_TOO_LARGE, "cannot encode %s: a %lu-byte payload; the limit is %lu bytes", dw_type_name(frame->type),
                    (unsigned long)payload.len, (unsigned long)DW_MAX_PAYLOAD);
    }
    put_u32(header, (uint32_t)payload.len);
    header[4] = (uint8_t)frame->type;
    header[5] = flags;
    put_u16(header + 6, 0);
    before = out->len;
    if (dw_buf_append(out, header, 8) != 0 || dw_buf_append(out, payload.data, payload.len) != 0) {
        out->len = before;
        dw_buf_free(&payload);
        return fail(err, DW_MALFORMED, "out of memory");
    }
    dw_buf_free(&payload);
    return 0;
}
