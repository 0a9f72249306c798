/*
 * test_vectors: checks the C codec against desk's wire test vectors (every tests/vectors/wire/ file,
 * format in that directory's README.md), and against the JSON rules of docs/protocol.md
 * section 6 that the vectors do not pin.
 *
 * Usage: test_vectors FILE.json...   (the Makefile passes every file of the directory).
 * For every case: the bytes pushed at once and pushed one byte at a time give the same result;
 * a `frame` case decodes to the recorded frame, leaves no byte over and encodes back to exactly
 * its bytes; an `error` case fails with the recorded code (and, when given, a message that
 * contains the recorded text); an `incomplete` case gives nothing, no error, and keeps every
 * byte. Then all valid cases of a file, pushed as one stream, decode in order.
 * May not depend on: anything but deskwire and the C99 standard library.
 */
#include "deskwire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;
static const char *current_file = "";
static const char *current_case = "";

static void failf(const char *fmt, const char *a, const char *b) {
    failures++;
    fprintf(stderr, "FAIL %s: %s: ", current_file, current_case);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    size_t cap = 0, n = 0;
    if (!f) return NULL;
    for (;;) {
        size_t got;
        if (n == cap) {
            char *grown;
            cap = cap ? cap * 2 : 65536;
            grown = realloc(data, cap);
            if (!grown) { free(data); fclose(f); return NULL; }
            data = grown;
        }
        got = fread(data + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) { free(data); fclose(f); return NULL; }
    fclose(f);
    *len = n;
    return data;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* the format says lower-case hex */
}

/* Decode lower-case hex; -1 on a bad digit or an odd length. */
static int from_hex(const dw_str *hex, uint8_t **out, size_t *len) {
    size_t i;
    if (hex->len % 2) return -1;
    *out = malloc(hex->len / 2 + 1);
    if (!*out) return -1;
    for (i = 0; i < hex->len / 2; i++) {
        int hi = hex_value(hex->ptr[2 * i]), lo = hex_value(hex->ptr[2 * i + 1]);
        if (hi < 0 || lo < 0) { free(*out); return -1; }
        (*out)[i] = (uint8_t)(hi * 16 + lo);
    }
    *len = hex->len / 2;
    return 0;
}

/* ---- outcomes --------------------------------------------------------------------------- */

enum outcome_kind { GOT_NOTHING, GOT_FRAME, GOT_ERROR };

typedef struct {
    enum outcome_kind kind;
    dw_frame frame;
    dw_error error;
    size_t left;      /* buffered bytes after the outcome */
    size_t frames;    /* how many frames came out */
} outcome;

/* Push everything at once (step 0) or `step` bytes at a time, calling next after each push
 * until it yields nothing; the first frame or error is the outcome. The decoder stays alive so
 * the frame's borrowed bytes remain valid; the caller frees it. */
static void run(dw_decoder *dec, const uint8_t *bytes, size_t len, size_t step, outcome *o) {
    size_t at = 0;
    memset(o, 0, sizeof *o);
    o->kind = GOT_NOTHING;
    dw_decoder_init(dec);
    do {
        size_t n = step == 0 ? len : (len - at < step ? len - at : step);
        if (dw_decoder_push(dec, bytes + at, n) != 0) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        at += n;
        for (;;) {
            dw_frame f;
            dw_error e;
            int rc = dw_decoder_next(dec, &f, &e);
            if (rc == 0) break;
            if (rc < 0) {
                if (o->kind == GOT_NOTHING) { o->kind = GOT_ERROR; o->error = e; }
                o->left = dw_decoder_buffered(dec);
                return;
            }
            o->frames++;
            if (o->kind == GOT_NOTHING) { o->kind = GOT_FRAME; o->frame = f; }
            else dw_frame_free(&f);
        }
    } while (at < len);
    o->left = dw_decoder_buffered(dec);
}

/* ---- comparing a decoded frame with the readable form ---------------------------------- */

static const dw_json *field(const dw_json *obj, const char *key) {
    const dw_json *v = dw_json_get(obj, key);
    if (!v) failf("the vector's frame has no `%s`%s", key, "");
    return v;
}

static int as_u64(const dw_json *v, uint64_t *out) {
    if (!v || v->kind != DW_JUINT) return 0;
    *out = v->u.uint;
    return 1;
}

static int as_i64(const dw_json *v, int64_t *out) {
    if (!v) return 0;
    if (v->kind == DW_JUINT && v->u.uint <= (uint64_t)INT64_MAX) { *out = (int64_t)v->u.uint; return 1; }
    if (v->kind == DW_JINT) { *out = v->u.sint; return 1; }
    return 0;
}

static void expect_uint(const dw_json *obj, const char *key, uint64_t got) {
    uint64_t want;
    char text[32];
    checks++;
    if (!as_u64(field(obj, key), &want) || want != got) {
        sprintf(text, "%lu", (unsigned long)got);
        failf("`%s` decoded as %s, not as the vector says", key, text);
    }
}

static void expect_bool(const dw_json *obj, const char *key, int got) {
    const dw_json *v = field(obj, key);
    checks++;
    if (!v || v->kind != DW_JBOOL || !v->u.boolean != !got) failf("`%s` decoded as %s, not as the vector says", key, got ? "true" : "false");
}

/* `data` (UTF-8 text) or `data_hex`. */
static void expect_data(const dw_json *obj, const dw_bytes *got) {
    const dw_json *text = dw_json_get(obj, "data"), *hex = dw_json_get(obj, "data_hex");
    checks++;
    if (text && text->kind == DW_JSTRING) {
        if (text->u.str.len != got->len || (got->len && memcmp(text->u.str.ptr, got->ptr, got->len) != 0))
            failf("data differs from `data`%s%s", "", "");
    } else if (hex && hex->kind == DW_JSTRING) {
        uint8_t *want;
        size_t n;
        if (from_hex(&hex->u.str, &want, &n) != 0) { failf("bad `data_hex`%s%s", "", ""); return; }
        if (n != got->len || (n && memcmp(want, got->ptr, n) != 0)) failf("data differs from `data_hex`%s%s", "", "");
        free(want);
    } else {
        failf("the vector's frame has neither `data` nor `data_hex`%s%s", "", "");
    }
}

/* The frame's JSON body as the encoder writes it, read back with sorted keys, so that it can be
 * compared with the vector's body as a JSON value. */
static void expect_body(const dw_frame *f, const dw_json *want, size_t prefix) {
    dw_buf out = {NULL, 0, 0};
    dw_error e;
    dw_json got;
    checks++;
    if (!want) return;
    if (dw_encode(f, &out, &e) != 0) { failf("cannot encode the decoded frame: %s%s", e.message, ""); return; }
    if (dw_json_parse(out.data + DW_HEADER_LEN + prefix, out.len - DW_HEADER_LEN - prefix, DW_JSON_SORTED, &got, &e) != 0) {
        failf("the encoded body does not parse: %s%s", e.message, "");
    } else {
        if (!dw_json_equal(&got, want)) failf("the decoded body differs from the vector's%s%s", "", "");
        dw_json_free(&got);
    }
    dw_buf_free(&out);
}

static void expect_frame(const dw_frame *f, const dw_json *want) {
    const dw_json *type = field(want, "type");
    int want_type = type && type->kind == DW_JSTRING ? dw_type_from_name(type->u.str.ptr) : 0;
    checks++;
    if (want_type != f->type) {
        failf("decoded a %s frame, the vector says %s", dw_type_name(f->type), type && type->kind == DW_JSTRING ? type->u.str.ptr : "?");
        return;
    }
    switch (f->type) {
    case DW_HELLO: {
        const dw_json *role = field(want, "role");
        expect_uint(want, "version", f->u.hello.version);
        expect_uint(want, "cols", f->u.hello.cols);
        expect_uint(want, "rows", f->u.hello.rows);
        checks++;
        /* `status_line` is recorded only when set. */
        if (dw_json_get(want, "status_line")) expect_bool(want, "status_line", f->u.hello.status_line);
        else if (f->u.hello.status_line) failf("status_line decoded as set; the vector does not set it%s%s", "", "");
        if (dw_json_get(want, "view")) expect_bool(want, "view", f->u.hello.view);
        else if (f->u.hello.view) failf("view decoded as set; the vector does not set it%s%s", "", "");
        if (!role || role->kind != DW_JSTRING || dw_role_from_name(role->u.str.ptr) != f->u.hello.role)
            failf("role decoded as %s%s", dw_role_name(f->u.hello.role), "");
        break;
    }
    case DW_WELCOME:
        expect_uint(want, "version", f->u.welcome.version);
        expect_body(f, field(want, "info"), 4);
        break;
    case DW_INPUT:
    case DW_OUTPUT:
        expect_data(want, &f->u.data);
        break;
    case DW_RESIZE:
        expect_uint(want, "cols", f->u.resize.cols);
        expect_uint(want, "rows", f->u.resize.rows);
        break;
    case DW_KEYFRAME:
        expect_bool(want, "more", f->u.keyframe.more);
        expect_data(want, &f->u.keyframe.data);
        break;
    case DW_SNAPSHOT_REQUEST:
        checks++;
        if (!dw_json_get(want, "history") != !f->u.snapshot_request.has_history)
            failf("`history` decoded as %s%s", f->u.snapshot_request.has_history ? "present" : "absent", "");
        if (f->u.snapshot_request.has_history) expect_uint(want, "history", f->u.snapshot_request.history);
        if (!dw_json_get(want, "from") != !f->u.snapshot_request.has_from)
            failf("`from` decoded as %s%s", f->u.snapshot_request.has_from ? "present" : "absent", "");
        if (f->u.snapshot_request.has_from) expect_uint(want, "from", f->u.snapshot_request.from);
        break;
    case DW_DETACH:
        break;
    case DW_SNAPSHOT:
        expect_body(f, field(want, "snapshot"), 0);
        break;
    case DW_EVENT:
    case DW_HOOK: {
        const dw_json *body = field(want, f->type == DW_EVENT ? "event" : "hook");
        checks++;
        if (body && !dw_json_equal(body, f->u.body)) failf("the decoded body differs from the vector's%s%s", "", "");
        break;
    }
    case DW_EXIT: {
        const dw_json *status = field(want, "status");
        const dw_json *value = dw_json_get(status, f->u.exit.signaled ? "signal" : "code");
        int64_t v;
        checks++;
        if (!value || !as_i64(value, &v) || v != f->u.exit.value || status->u.obj.len != 1)
            failf("status decoded as %s %s, not as the vector says", f->u.exit.signaled ? "signal" : "code", "");
        expect_bool(want, "escalated", f->u.exit.escalated);
        break;
    }
    case DW_ERROR: {
        const dw_json *code = field(want, "code"), *message = field(want, "message");
        checks += 2;
        if (!code || code->kind != DW_JSTRING || dw_code_from_name(code->u.str.ptr) != f->u.error.code)
            failf("code decoded as %s%s", dw_code_name(f->u.error.code), "");
        if (!message || message->kind != DW_JSTRING || message->u.str.len != f->u.error.message.len ||
            memcmp(message->u.str.ptr, f->u.error.message.ptr, f->u.error.message.len) != 0)
            failf("message differs%s%s", "", "");
        break;
    }
    case DW_PING:
    case DW_PONG:
        expect_uint(want, "nonce", f->u.nonce);
        break;
    case DW_SIGNAL:
        expect_uint(want, "signal", f->u.signal.signal);
        expect_uint(want, "grace_ms", f->u.signal.grace_ms);
        break;
    case DW_TERMINAL:
        expect_uint(want, "op", f->u.terminal.op);
        if (dw_json_get(want, "data") || f->u.terminal.data.len > 0) expect_data(want, &f->u.terminal.data);
        break;
    default:
        failf("unexpected frame type%s%s", "", "");
    }
}

static void expect_same(const outcome *a, const outcome *b) {
    checks++;
    if (a->kind != b->kind || (a->kind == GOT_ERROR && a->error.code != b->error.code))
        failf("pushed at once and pushed byte by byte give different results%s%s", "", "");
}

/* ---- one case --------------------------------------------------------------------------- */

static void check_case(const dw_json *c, dw_buf *stream, size_t *stream_frames) {
    const dw_json *name = dw_json_get(c, "name"), *hex = dw_json_get(c, "hex");
    const dw_json *frame = dw_json_get(c, "frame"), *error = dw_json_get(c, "error"), *incomplete = dw_json_get(c, "incomplete");
    uint8_t *bytes;
    size_t len;
    dw_decoder whole, bytewise;
    outcome a, b;
    current_case = name && name->kind == DW_JSTRING ? name->u.str.ptr : "(unnamed)";
    if (!hex || hex->kind != DW_JSTRING || from_hex(&hex->u.str, &bytes, &len) != 0) {
        failf("no valid `hex`%s%s", "", "");
        return;
    }
    if ((frame != NULL) + (error != NULL) + (incomplete != NULL) != 1) {
        failf("needs exactly one of frame, error, incomplete%s%s", "", "");
        free(bytes);
        return;
    }
    run(&whole, bytes, len, 0, &a);
    run(&bytewise, bytes, len, 1, &b);
    expect_same(&a, &b);
    if (frame) {
        checks++;
        if (a.kind != GOT_FRAME) {
            failf("expected a frame, got %s%s", a.kind == GOT_ERROR ? a.error.message : "nothing (incomplete)", "");
        } else {
            dw_buf out = {NULL, 0, 0};
            dw_error e;
            expect_frame(&a.frame, frame);
            checks += 2;
            if (a.frames != 1 || a.left != 0) failf("bytes are left over after the frame%s%s", "", "");
            if (dw_encode(&a.frame, &out, &e) != 0) failf("cannot encode the decoded frame: %s%s", e.message, "");
            else if (out.len != len || memcmp(out.data, bytes, len) != 0) failf("encoding the decoded frame gives other bytes%s%s", "", "");
            dw_buf_free(&out);
            if (b.kind == GOT_FRAME) expect_frame(&b.frame, frame);
            if (dw_buf_append(stream, bytes, len) != 0) exit(2);
            (*stream_frames)++;
        }
    } else if (error) {
        const dw_json *code = dw_json_get(error, "code"), *contains = dw_json_get(error, "contains");
        int want = code && code->kind == DW_JSTRING ? dw_code_from_name(code->u.str.ptr) : 0;
        checks++;
        if (a.kind != GOT_ERROR) {
            failf("expected error %s, got %s", code && code->kind == DW_JSTRING ? code->u.str.ptr : "?", a.kind == GOT_FRAME ? "a frame" : "nothing");
        } else if (a.error.code != want) {
            failf("expected error %s, got %s", code->u.str.ptr, dw_code_name(a.error.code));
        } else if (contains && contains->kind == DW_JSTRING && !strstr(a.error.message, contains->u.str.ptr)) {
            failf("the message \"%s\" does not contain \"%s\"", a.error.message, contains->u.str.ptr);
        }
    } else {
        checks++;
        if (a.kind != GOT_NOTHING || a.left != len) failf("expected nothing yet and every byte kept%s%s", "", "");
    }
    if (a.kind == GOT_FRAME) dw_frame_free(&a.frame);
    if (b.kind == GOT_FRAME) dw_frame_free(&b.frame);
    dw_decoder_free(&whole);
    dw_decoder_free(&bytewise);
    free(bytes);
}

/* Every valid case of a file as one stream, in reads of 7 bytes: the frames come out in order
 * and each encodes back to its own bytes (one read may hold several frames, a frame may span
 * reads). */
static void check_stream(const dw_buf *stream, size_t expected) {
    dw_decoder dec;
    size_t at = 0, frames = 0, offset = 0;
    current_case = "all valid cases as one stream";
    dw_decoder_init(&dec);
    while (at < stream->len) {
        size_t n = stream->len - at < 7 ? stream->len - at : 7;
        dw_frame f;
        dw_error e;
        int rc;
        if (dw_decoder_push(&dec, stream->data + at, n) != 0) exit(2);
        at += n;
        while ((rc = dw_decoder_next(&dec, &f, &e)) == 1) {
            dw_buf out = {NULL, 0, 0};
            checks++;
            if (dw_encode(&f, &out, &e) != 0 || offset + out.len > stream->len || memcmp(out.data, stream->data + offset, out.len) != 0)
                failf("frame out of order or changed in the stream%s%s", "", "");
            offset += out.len;
            frames++;
            dw_buf_free(&out);
            dw_frame_free(&f);
        }
        if (rc < 0) { failf("the stream fails: %s%s", e.message, ""); break; }
    }
    checks++;
    if (frames != expected || dw_decoder_buffered(&dec) != 0) failf("the stream did not give every frame back%s%s", "", "");
    dw_decoder_free(&dec);
}

static void check_file(const char *path) {
    size_t len, i, stream_frames = 0;
    char *text = read_file(path, &len);
    dw_json cases;
    dw_error e;
    dw_buf stream = {NULL, 0, 0};
    current_file = path;
    current_case = "(file)";
    if (!text) { failf("cannot read the file%s%s", "", ""); return; }
    if (dw_json_parse((const uint8_t *)text, len, DW_JSON_SORTED, &cases, &e) != 0) {
        failf("not JSON: %s%s", e.message, "");
        free(text);
        return;
    }
    free(text);
    if (cases.kind != DW_JARRAY || cases.u.arr.len == 0) failf("not a non-empty array of cases%s%s", "", "");
    else
        for (i = 0; i < cases.u.arr.len; i++) check_case(&cases.u.arr.items[i], &stream, &stream_frames);
    if (stream_frames) check_stream(&stream, stream_frames);
    printf("%-48s %lu cases\n", path, (unsigned long)(cases.kind == DW_JARRAY ? cases.u.arr.len : 0));
    dw_buf_free(&stream);
    dw_json_free(&cases);
}

/* ---- JSON rules the vectors do not pin (spec section 6) --------------------------------- */

/* An EVENT body re-encodes to exactly `want`. The expected outputs were read off serde_json
 * (the Rust codec) for the same inputs. */
static void event_reencodes(const char *body, const char *want) {
    uint8_t head[8];
    dw_buf in = {NULL, 0, 0}, out = {NULL, 0, 0};
    dw_decoder dec;
    dw_frame f;
    dw_error e;
    size_t n = strlen(body);
    current_case = body;
    head[0] = (uint8_t)(n & 0xff); head[1] = (uint8_t)(n >> 8); head[2] = 0; head[3] = 0;
    head[4] = DW_EVENT; head[5] = 0; head[6] = 0; head[7] = 0;
    if (dw_buf_append(&in, head, 8) || dw_buf_append(&in, body, n)) exit(2);
    dw_decoder_init(&dec);
    if (dw_decoder_push(&dec, in.data, in.len) != 0) exit(2);
    checks++;
    if (dw_decoder_next(&dec, &f, &e) != 1) {
        failf("refused: %s%s", e.message, "");
    } else {
        if (dw_encode(&f, &out, &e) != 0) failf("cannot encode: %s%s", e.message, "");
        else if (out.len - 8 != strlen(want) || memcmp(out.data + 8, want, strlen(want)) != 0) {
            dw_buf_append(&out, "", 1);
            failf("re-encodes as %s, expected %s", (const char *)out.data + 8, want);
        }
        dw_frame_free(&f);
    }
    dw_buf_free(&in);
    dw_buf_free(&out);
    dw_decoder_free(&dec);
}

/* A body of `type` is refused with MALFORMED (or accepted, when ok is 1). */
static void body_verdict(int type, const char *body, int ok) {
    dw_frame f;
    dw_error e;
    int rc = dw_decode_payload(type, 0, (const uint8_t *)body, strlen(body), &f, &e);
    current_case = body;
    checks++;
    if (ok && rc != 0) failf("refused: %s%s", e.message, "");
    if (!ok && (rc == 0 || e.code != DW_MALFORMED)) failf("accepted, expected MALFORMED%s%s", "", "");
    if (rc == 0) dw_frame_free(&f);
}

static char *nested(int levels) {
    /* {"a": then levels-1 arrays */
    size_t n = 6 + 2 * (size_t)(levels - 1) + 1, k = 0;
    char *s = malloc(n + 1);
    int i;
    if (!s) exit(2);
    memcpy(s, "{\"a\":", 5);
    k = 5;
    for (i = 0; i < levels - 1; i++) s[k++] = '[';
    for (i = 0; i < levels - 1; i++) s[k++] = ']';
    s[k++] = '}';
    s[k] = '\0';
    return s;
}

static void check_json_rules(void) {
    static const char *snap =
        "{\"cols\":80,\"rows\":3,\"cursor\":{\"row\":1,\"col\":9,\"visible\":true},\"title\":\"t\",\"modes\":{"
        "\"alternate_screen\":false,\"bracketed_paste\":true,\"app_cursor_keys\":false,\"app_keypad\":false,"
        "\"cursor_visible\":true,\"autowrap\":true,\"origin\":false,\"insert\":false,\"mouse\":\"none\","
        "\"mouse_encoding\":\"default\",\"focus_events\":false},\"lines\":[]";
    char body[1024];
    char *deep;
    current_file = "JSON rules (docs/protocol.md section 6)";
    /* Numbers: integers stay exact, the rest is binary64 in the shortest canonical form. */
    event_reencodes("{\"x\":1e5}", "{\"x\":100000.0}");
    event_reencodes("{\"x\":-0}", "{\"x\":-0.0}");
    event_reencodes("{\"x\":1e16}", "{\"x\":1e+16}");
    event_reencodes("{\"x\":1e15}", "{\"x\":1000000000000000.0}");
    event_reencodes("{\"x\":1e-7}", "{\"x\":1e-7}");
    event_reencodes("{\"x\":0.00001}", "{\"x\":0.00001}");
    event_reencodes("{\"x\":0.1}", "{\"x\":0.1}");
    event_reencodes("{\"x\":5e-324}", "{\"x\":5e-324}");
    event_reencodes("{\"x\":1.5e300}", "{\"x\":1.5e+300}");
    event_reencodes("{\"x\":123456789012345678901}", "{\"x\":1.2345678901234568e+20}");
    event_reencodes("{\"x\":-9223372036854775809}", "{\"x\":-9.223372036854776e+18}");
    event_reencodes("{\"x\":5.946782406804386e-300}", "{\"x\":5.946782406804386e-300}");
    event_reencodes("{\"x\":0.0}", "{\"x\":0.0}");
    /* 2^-1018 and 2^-1009: powers of two, where the nearest 16-digit decimal does not read back
     * but the one above does (serde_json writes these). */
    event_reencodes("{\"x\":7.120236347223045e-307}", "{\"x\":7.120236347223045e-307}");
    event_reencodes("{\"x\":7.2911220195563975e-304}", "{\"x\":7.291122019556398e-304}");
    /* Keys sorted at every depth, a repeated key keeps its last value, whitespace dropped. */
    event_reencodes(" {\"b\":1, \"a\":{\"z\":1,\"y\":2},\"b\":3}\r\n", "{\"a\":{\"y\":2,\"z\":1},\"b\":3}");
    /* Strings: the escapes of section 6; / and U+007F as themselves; a pair of escapes is one
     * character. */
    event_reencodes("{\"s\":\"\\/\\u0000\\u001f\\u007f\\b\\f\\n\\r\\t\\ud83c\\udf89\"}", "{\"s\":\"/\\u0000\\u001f\x7f\\b\\f\\n\\r\\t\xf0\x9f\x8e\x89\"}");
    body_verdict(DW_EVENT, "{\"x\":1e400}", 0);
    body_verdict(DW_EVENT, "{\"x\":01}", 0);
    body_verdict(DW_EVENT, "{\"x\":1.}", 0);
    body_verdict(DW_EVENT, "{\"x\":\"\x01\"}", 0);
    body_verdict(DW_EVENT, "{\"x\":\"\\udc00\"}", 0);
    body_verdict(DW_EVENT, "{\"x\":\"\\ud800x\"}", 0);
    body_verdict(DW_EVENT, "{\"x\":\"\xc0\xaf\"}", 0);
    body_verdict(DW_EVENT, "{\"x\":\"\xed\xa0\x80\"}", 0);
    body_verdict(DW_EVENT, "{\"x\":1,}", 0);
    body_verdict(DW_HOOK, "[]", 0);
    deep = nested(127);
    body_verdict(DW_EVENT, deep, 1);
    free(deep);
    deep = nested(128);
    body_verdict(DW_EVENT, deep, 0);
    free(deep);
    /* SNAPSHOT: generation, last_input_ms, canonical and state may be missing; the rest may not. */
    sprintf(body, "%s}", snap);
    body_verdict(DW_SNAPSHOT, body, 1);
    sprintf(body, "%s,\"state\":null,\"unknown\":[1,{}],\"unknown\":2}", snap);
    body_verdict(DW_SNAPSHOT, body, 1);
    sprintf(body, "%s,\"generation\":null}", snap);
    body_verdict(DW_SNAPSHOT, body, 0);
    sprintf(body, "%s,\"cols\":81}", snap);
    body_verdict(DW_SNAPSHOT, body, 0);
    sprintf(body, "{\"rows\":3%s}", strstr(snap, ",\"cursor\""));
    body_verdict(DW_SNAPSHOT, body, 0);
    sprintf(body, "{\"cols\":80.0%s}", snap + 10);
    body_verdict(DW_SNAPSHOT, body, 0);
    sprintf(body, "{\"cols\":8e1%s}", snap + 10);
    body_verdict(DW_SNAPSHOT, body, 0);
    sprintf(body, "%s,\"state\":[]}", snap);
    body_verdict(DW_SNAPSHOT, body, 0);
}

/* ---- the fuzz corpus (fuzz/corpus/wire_decode/, read as desk::wire::fuzz_check reads it) ---- */

/* What a stream decodes to: how many frames, the error code that ended it (0: none), and every
 * frame re-encoded, as hex, each followed by ',' ("!" for an EVENT whose canonical re-encoding
 * passes MAX_PAYLOAD). */
typedef struct {
    size_t frames;
    int error;
    dw_buf encoded;
} verdict;

/* Decode `stream` in the reads fuzz_check makes of it: the sizes cycle, 0 means the rest. */
static void decode_reads(const uint8_t *stream, size_t len, const uint8_t *sizes, size_t nsizes, verdict *v) {
    dw_decoder dec;
    size_t at = 0, k = 0;
    memset(v, 0, sizeof *v);
    dw_decoder_init(&dec);
    do {
        size_t n = len - at;
        dw_frame f;
        dw_error e;
        int rc;
        if (nsizes && sizes[k % nsizes] != 0 && sizes[k % nsizes] < n) n = sizes[k % nsizes];
        k++;
        if (dw_decoder_push(&dec, stream + at, n) != 0) exit(2);
        at += n;
        checks++;
        if (dec.len > DW_HEADER_LEN + DW_MAX_PAYLOAD + n) failf("the decoder holds more than one frame and one read%s%s", "", "");
        while ((rc = dw_decoder_next(&dec, &f, &e)) == 1) {
            dw_buf once = {NULL, 0, 0};
            v->frames++;
            if (dw_encode(&f, &once, &e) != 0) {
                checks++;
                if (e.code != DW_TOO_LARGE || f.type != DW_EVENT) failf("a decoded frame does not encode: %s%s", e.message, "");
                if (dw_buf_append(&v->encoded, "!,", 2) != 0) exit(2);
            } else {
                /* The re-encoding decodes to a frame that encodes to the same bytes. */
                dw_decoder again;
                dw_frame g;
                dw_buf twice = {NULL, 0, 0};
                size_t i;
                dw_decoder_init(&again);
                if (dw_decoder_push(&again, once.data, once.len) != 0) exit(2);
                checks++;
                if (dw_decoder_next(&again, &g, &e) != 1) {
                    failf("a re-encoded frame does not decode: %s%s", e.message, "");
                } else {
                    if (dw_encode(&g, &twice, &e) != 0 || twice.len != once.len || memcmp(twice.data, once.data, once.len) != 0 ||
                        dw_decoder_buffered(&again) != 0)
                        failf("a re-encoded frame decodes to another frame%s%s", "", "");
                    dw_frame_free(&g);
                }
                dw_buf_free(&twice);
                dw_decoder_free(&again);
                for (i = 0; i < once.len; i++) {
                    char hex[3];
                    sprintf(hex, "%02x", once.data[i]);
                    if (dw_buf_append(&v->encoded, hex, 2) != 0) exit(2);
                }
                if (dw_buf_append(&v->encoded, ",", 1) != 0) exit(2);
            }
            dw_buf_free(&once);
            dw_frame_free(&f);
        }
        if (rc < 0) {
            v->error = e.code;
            break;
        }
    } while (at < len);
    dw_decoder_free(&dec);
}

/* fuzz_check's reading of a corpus input: the first byte says how many of the next bytes are
 * read sizes; the rest is the stream. */
static void corpus_input(const char *path, int print) {
    size_t len, nsizes;
    char *data = read_file(path, &len);
    verdict cut, whole;
    const uint8_t *bytes = (const uint8_t *)data;
    current_file = path;
    current_case = "corpus input";
    if (!data) { failf("cannot read the file%s%s", "", ""); return; }
    if (len == 0) { free(data); if (print) printf("0 0 \n"); return; }
    nsizes = (size_t)(bytes[0] % 16);
    if (nsizes > len - 1) nsizes = len - 1;
    decode_reads(bytes + 1 + nsizes, len - 1 - nsizes, bytes + 1, nsizes, &cut);
    decode_reads(bytes + 1 + nsizes, len - 1 - nsizes, NULL, 0, &whole);
    checks++;
    if (cut.frames != whole.frames || cut.error != whole.error || cut.encoded.len != whole.encoded.len ||
        (cut.encoded.len && memcmp(cut.encoded.data, whole.encoded.data, cut.encoded.len) != 0))
        failf("cutting the stream changed what it decodes to%s%s", "", "");
    /* frames, error code (0: none), then each frame's re-encoding in hex followed by ',' */
    if (print) printf("%lu %d %.*s\n", (unsigned long)whole.frames, whole.error, (int)whole.encoded.len, (const char *)whole.encoded.data);
    dw_buf_free(&cut.encoded);
    dw_buf_free(&whole.encoded);
    free(data);
}

int main(int argc, char **argv) {
    int i;
    if (argc < 2) {
        fprintf(stderr, "usage: %s VECTOR.json... | %s --corpus FILE... | %s --verdicts FILE...\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "--corpus") == 0 || strcmp(argv[1], "--verdicts") == 0) {
        /* --corpus: the fuzz_check properties; --verdicts: also one line per input, for the
         * Rust side to compare with its own decoder (tests/it/native.rs). */
        int print = strcmp(argv[1], "--verdicts") == 0;
        for (i = 2; i < argc; i++) corpus_input(argv[i], print);
        if (!print) printf("fuzz corpus: %d inputs, %d checks, %d failures\n", argc - 2, checks, failures);
        return failures ? 1 : 0;
    }
    for (i = 1; i < argc; i++) check_file(argv[i]);
    check_json_rules();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
