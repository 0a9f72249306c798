/*
 * deskwire: a second, independent codec for desk's wire protocol (docs/protocol.md), in
 * portable C99.
 *
 * Owns: the frame layouts, the header checks, an incremental decoder that cuts a byte stream
 * into frames, the encoder, and the JSON reader/writer the JSON-bodied frames need.
 * Invariants: a header declaring more than DW_MAX_PAYLOAD bytes is refused on its 8 bytes,
 * before any payload is buffered; every error is reported with the code the spec names
 * (section 7) and a message naming what was wrong; every integer is read and written byte by
 * byte in little-endian order (no casts of buffers to wider types, no signed shifts); the
 * encoder refuses a frame its own decoder would refuse, so it never writes an invalid frame.
 * May not depend on: anything beyond the C99 standard library (no sockets, no clocks, no
 * POSIX); the client, deskc.c, adds the POSIX parts.
 *
 * Number parsing and printing use strtod and snprintf, so the process must run in the "C"
 * locale for LC_NUMERIC (the default of every C program that does not call setlocale).
 */
#ifndef DESKWIRE_H
#define DESKWIRE_H

#include <stddef.h>
#include <stdint.h>

/* Header size: u32 payload length, u8 type, u8 flags, u16 reserved (spec section 2). */
#define DW_HEADER_LEN 8u
/* The largest payload either side accepts, 1 MiB (spec section 2). */
#define DW_MAX_PAYLOAD 1048576u
/* The longest ERROR message, in bytes (spec section 5.12). */
#define DW_MAX_ERROR_MESSAGE 1024u
/* KEYFRAME flag: more chunks of the same keyframe follow. */
#define DW_FLAG_MORE 0x01u
/* HELLO option bit (payload byte 7): a status line in a view of another size; the other bits are reserved. */
#define DW_HELLO_STATUS_LINE 0x01u
/* HELLO option bit: always a view, never the raw output, even at the session's size. */
#define DW_HELLO_VIEW 0x02u
/* The protocol version this codec speaks (spec section 12). */
#define DW_PROTOCOL_VERSION 1u
/* The deepest JSON nesting a body may have; the body's own object is level 1 (spec section 6). */
#define DW_JSON_MAX_DEPTH 127

enum dw_type {
    DW_HELLO = 0x01,
    DW_WELCOME = 0x02,
    DW_INPUT = 0x03,
    DW_RESIZE = 0x04,
    DW_OUTPUT = 0x05,
    DW_KEYFRAME = 0x06,
    DW_SNAPSHOT_REQUEST = 0x07,
    DW_SNAPSHOT = 0x08,
    DW_EVENT = 0x09,
    DW_DETACH = 0x0a,
    DW_EXIT = 0x0b,
    DW_ERROR = 0x0c,
    DW_PING = 0x0d,
    DW_PONG = 0x0e,
    DW_SIGNAL = 0x0f,
    DW_HOOK = 0x10,
    DW_TERMINAL = 0x11 /* version 3: a local client lends its terminal (spec section 5.16) */
};

enum dw_role { DW_CONTROLLER = 1, DW_VIEWER = 2, DW_OBSERVER = 3, DW_QUERY = 4 };

enum dw_code {
    DW_BAD_HELLO = 1,
    DW_UNSUPPORTED_VERSION = 2,
    DW_TOO_LARGE = 3,
    DW_UNKNOWN_TYPE = 4,
    DW_MALFORMED = 5,
    DW_NOT_PERMITTED = 6,
    DW_INPUT_FULL = 7,
    DW_TOO_SLOW = 8,
    DW_EXITING = 9,
    DW_INTERNAL = 10,
    DW_PEER_REFUSED = 11,
    DW_SESSION_FULL = 12
};

/* Names as the spec and the test vectors spell them; NULL for an unknown value. */
const char *dw_type_name(int type);
const char *dw_code_name(int code);
const char *dw_role_name(int role);
/* The value for a name, or 0 when the name is unknown. */
int dw_type_from_name(const char *name);
int dw_code_from_name(const char *name);
int dw_role_from_name(const char *name);

/* Why something could not be decoded or encoded: a code from enum dw_code and a sentence. */
typedef struct dw_error {
    int code;
    char message[256];
} dw_error;

/* A growable byte buffer. Zero-initialise it; dw_buf_free releases it. */
typedef struct dw_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} dw_buf;
int dw_buf_append(dw_buf *buf, const void *bytes, size_t n); /* 0, or -1 when out of memory */
void dw_buf_free(dw_buf *buf);

/* Whether bytes are well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
int dw_utf8_valid(const uint8_t *p, size_t n);

/* ---- JSON values ---------------------------------------------------------------------- */

enum dw_json_kind {
    DW_JNULL,
    DW_JBOOL,
    DW_JUINT,  /* an integer literal 0 ..= 2^64-1 */
    DW_JINT,   /* a negative integer literal -2^63 ..= -1 */
    DW_JFLOAT, /* any other number: a fraction, an exponent, -0, or an integer out of range */
    DW_JSTRING,
    DW_JARRAY,
    DW_JOBJECT
};

/* A string: `len` bytes of UTF-8 (which may include NUL), followed by a NUL not counted. */
typedef struct dw_str {
    char *ptr;
    size_t len;
} dw_str;

typedef struct dw_json dw_json;
typedef struct dw_member dw_member;

struct dw_json {
    enum dw_json_kind kind;
    union {
        int boolean;
        uint64_t uint;
        int64_t sint;
        double num;
        dw_str str;
        struct {
            dw_json *items;
            size_t len;
        } arr;
        struct {
            dw_member *members;
            size_t len;
        } obj;
    } u;
};

struct dw_member {
    dw_str key;
    dw_json value;
};

enum dw_json_mode {
    /* Every object's keys sorted by their UTF-8 bytes; a repeated key keeps its last value.
     * What EVENT and HOOK bodies are (spec section 6). */
    DW_JSON_SORTED,
    /* Members kept as written, repeated keys included: for typed bodies, whose reader checks
     * the keys it knows. */
    DW_JSON_RAW
};

/* Parse one JSON value (any kind; surrounding whitespace allowed). 0 on success; -1 with
 * err->code DW_MALFORMED otherwise. On success free the value with dw_json_free. */
int dw_json_parse(const uint8_t *p, size_t n, enum dw_json_mode mode, dw_json *out, dw_error *err);
void dw_json_free(dw_json *value);
/* Append the canonical encoding: no whitespace, members in their stored order. -1 when a value
 * cannot be encoded (a string that is not UTF-8, a non-finite number) or out of memory. */
int dw_json_encode(const dw_json *value, dw_buf *out, dw_error *err);
/* Equality as JSON values: the same kind and value; objects compare member by member in their
 * stored order (parse both sides with DW_JSON_SORTED to compare regardless of key order). */
int dw_json_equal(const dw_json *a, const dw_json *b);
/* The member named `key` in an object (the last one if repeated), or NULL. */
const dw_json *dw_json_get(const dw_json *object, const char *key);

/* ---- Frames ---------------------------------------------------------------------------- */

/* Bytes inside a decoder's buffer (or the caller's, when encoding); not owned. */
typedef struct dw_bytes {
    const uint8_t *ptr;
    size_t len;
} dw_bytes;

/* WELCOME's SessionInfo (spec section 5.2). */
typedef struct dw_session_info {
    dw_str name;
    uint32_t generation;
    dw_str provider;
    uint32_t pid;
    uint32_t master_pid;
    dw_str *command;
    size_t command_len;
    dw_str cwd;
    uint16_t cols;
    uint16_t rows;
    uint32_t controllers;
    uint32_t viewers;
    uint32_t observers;
    dw_str title;
    uint64_t started_at_ms;
    dw_json *state; /* an object, or NULL when absent; its members are kept as received */
} dw_session_info;

enum dw_mouse { DW_MOUSE_NONE, DW_MOUSE_PRESS, DW_MOUSE_PRESS_RELEASE, DW_MOUSE_BUTTON_MOTION, DW_MOUSE_ANY_MOTION };
enum dw_mouse_encoding { DW_MOUSE_ENC_DEFAULT, DW_MOUSE_ENC_UTF8, DW_MOUSE_ENC_SGR, DW_MOUSE_ENC_URXVT };

/* SNAPSHOT's SnapshotReply (spec section 5.8). Booleans are 0 or 1. */
typedef struct dw_snapshot {
    uint16_t cols;
    uint16_t rows;
    uint16_t cursor_row;
    uint16_t cursor_col;
    int cursor_shown; /* cursor.visible */
    dw_str title;
    struct {
        int alternate_screen, bracketed_paste, app_cursor_keys, app_keypad, cursor_visible, autowrap,
            origin, insert;
        enum dw_mouse mouse;
        enum dw_mouse_encoding mouse_encoding;
        int focus_events;
    } modes;
    dw_str *lines;
    size_t lines_len;
    uint32_t generation;
    int has_last_input; /* 0: last_input_ms is null */
    uint64_t last_input_ms;
    int canonical;
    dw_json *state; /* as in dw_session_info */
    dw_json *history; /* an array of history rows as received, or NULL when absent */
    /* history_start, history_first, history_end: each present when has_* is 1 */
    int has_history_start, has_history_first, has_history_end;
    uint64_t history_start, history_first, history_end;
    /* `foreground` (who has the terminal), when present: */
    int has_foreground;
    uint32_t fg_pgid;
    dw_str fg_program;
    int fg_own;
    int fg_reading; /* -1: null (not known), 0: false, 1: true */
} dw_snapshot;

/* One frame. Byte payloads (INPUT, OUTPUT, KEYFRAME data, ERROR message) point into the
 * decoder's buffer and stay valid until the next dw_decoder_push, dw_decoder_next or
 * dw_decoder_free; JSON bodies are owned by the frame (dw_frame_free). */
typedef struct dw_frame {
    int type; /* enum dw_type */
    union {
        struct {
            uint16_t version;
            uint8_t role;
            uint16_t cols, rows;
            int status_line; /* DW_HELLO_STATUS_LINE */
            int view;        /* DW_HELLO_VIEW */
        } hello;
        struct {
            uint16_t version;
            dw_session_info *info;
        } welcome;
        dw_bytes data; /* INPUT, OUTPUT */
        struct {
            uint16_t cols, rows;
        } resize;
        struct {
            int more;
            dw_bytes data;
        } keyframe;
        struct {
            int has_history; /* 0: the empty payload; 1: a 4-byte one holding `history` */
            uint32_t history;
            int has_from;    /* 1 (with has_history): the 12-byte page form, `history` then `from` */
            uint64_t from;
        } snapshot_request;
        dw_snapshot *snapshot;
        dw_json *body; /* EVENT, HOOK: an object, keys sorted */
        struct {
            int signaled; /* 0: exited with the code `value`; 1: killed by the signal `value` */
            int32_t value;
            int escalated;
        } exit;
        struct {
            uint16_t code;
            dw_bytes message;
        } error;
        uint64_t nonce; /* PING, PONG */
        struct {
            uint8_t signal;
            uint32_t grace_ms;
        } signal;
        struct {
            uint8_t op;    /* 1 TAKE, 2 TAKEN, 3 READY, 4 GIVE, 5 PAINT, 6 REDRAWN */
            dw_bytes data; /* TAKE's keys, GIVE's and PAINT's bytes; empty for the others */
        } terminal;
    } u;
} dw_frame;

void dw_frame_free(dw_frame *frame);

/* Validate an 8-byte header, in the spec's order (type, length, flags and reserved bits). */
int dw_decode_header(const uint8_t header[8], uint32_t *len, int *type, uint8_t *flags, dw_error *err);
/* Decode a payload whose header dw_decode_header accepted. 0, or -1 with the error. */
int dw_decode_payload(int type, uint8_t flags, const uint8_t *payload, size_t len, dw_frame *out, dw_error *err);

/* Cuts a byte stream into frames. Holds at most one incomplete frame plus one push; after an
 * error every call to dw_decoder_next repeats it (the stream cannot be resynchronised). */
typedef struct dw_decoder {
    uint8_t *buf;
    size_t len;   /* bytes in buf */
    size_t start; /* bytes of buf already returned as frames */
    size_t cap;
    int failed;
    dw_error error;
} dw_decoder;

void dw_decoder_init(dw_decoder *dec);
int dw_decoder_push(dw_decoder *dec, const void *bytes, size_t n); /* 0, or -1 out of memory */
/* 1: a frame in *out (free it with dw_frame_free); 0: more bytes are needed; -1: *err. */
int dw_decoder_next(dw_decoder *dec, dw_frame *out, dw_error *err);
size_t dw_decoder_buffered(const dw_decoder *dec); /* received, not yet returned as frames */
void dw_decoder_free(dw_decoder *dec);

/* Append a frame's bytes. -1, with a DW_MALFORMED error naming the field, when the frame is
 * one a decoder would refuse (payload over the limit, role, size, signal or code out of range,
 * ERROR message over the limit or not UTF-8) or out of memory; `out` is then unchanged. */
int dw_encode(const dw_frame *frame, dw_buf *out, dw_error *err);

#endif
