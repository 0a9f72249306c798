/*
 * deskc: a tiny desk client in C, built on deskwire (docs/protocol.md).
 *
 *   deskc SOCKET snapshot   connect as a viewer, ask for a SNAPSHOT, print its screen lines
 *                           (control characters in them shown as '?')
 *   deskc SOCKET stream     connect as a viewer and copy the terminal stream (KEYFRAME and
 *                           OUTPUT payloads) to stdout until the session's EXIT
 *   deskc --version
 *
 * Exit status: 0 when the snapshot was printed or the stream ended with EXIT (or stdout was
 * closed by its reader); 1 when the master refused us (ERROR), the stream could not be decoded,
 * the connection ended without EXIT, or a system call failed, with a message on stderr naming
 * what was wrong; 2 for a usage error.
 * Owns: the POSIX side (socket, poll, write); the bytes belong to deskwire.
 */
#include "deskwire.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DESKC_VERSION "0.1.0"

/* How long `snapshot` waits for the master's WELCOME and SNAPSHOT, like desk's own CLI
 * commands (REQUEST_TIMEOUT in the spec's section 11): a live master answers in milliseconds. */
#define REQUEST_TIMEOUT_MS 5000

/* One read from the socket: the master's largest OUTPUT (64 KiB, PTY_READ_CHUNK) plus its
 * header, so one OUTPUT normally arrives in one read. */
#define READ_CHUNK (65536 + 8)

static const char *socket_path = "";

static int die(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "deskc: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static int connect_socket(const char *path, int *fd_out) {
    struct sockaddr_un addr;
    size_t len = strlen(path);
    int fd;
    if (len >= sizeof addr.sun_path)
        return die("socket path %s is %lu bytes; the limit is %lu", path, (unsigned long)len,
                   (unsigned long)(sizeof addr.sun_path - 1));
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, len + 1);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return die("cannot create a socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        if (e == ECONNREFUSED) return die("cannot connect to %s: nobody accepts on it (the session's master is gone)", path);
        return die("cannot connect to %s: %s", path, strerror(e));
    }
    *fd_out = fd;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n, int is_socket) {
    while (n > 0) {
        ssize_t w = is_socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_frame(int fd, const dw_frame *f) {
    dw_buf out = {NULL, 0, 0};
    dw_error e;
    int rc;
    if (dw_encode(f, &out, &e) != 0) return die("cannot encode %s: %s", dw_type_name(f->type), e.message);
    rc = write_all(fd, out.data, out.len, 1);
    dw_buf_free(&out);
    if (rc != 0) return die("cannot send %s to %s: %s", dw_type_name(f->type), socket_path, strerror(errno));
    return 0;
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next frame: 1 with *f, 0 at end-of-file, -1 after printing why. A deadline of 0 waits
 * forever. */
static int next_frame(int fd, dw_decoder *dec, dw_frame *f, long deadline) {
    static uint8_t chunk[READ_CHUNK];
    for (;;) {
        dw_error e;
        ssize_t got;
        int rc = dw_decoder_next(dec, f, &e);
        if (rc == 1) return 1;
        if (rc < 0) {
            die("the master sent bytes that are not a valid frame (%s): %s", dw_code_name(e.code), e.message);
            return -1;
        }
        if (deadline) {
            struct pollfd p;
            long left = deadline - now_ms();
            p.fd = fd;
            p.events = POLLIN;
            p.revents = 0;
            if (left <= 0 || poll(&p, 1, (int)left) == 0) {
                die("no answer from %s within %d ms", socket_path, REQUEST_TIMEOUT_MS);
                return -1;
            }
        }
        got = read(fd, chunk, sizeof chunk);
        if (got < 0) {
            if (errno == EINTR) continue;
            die("cannot read from %s: %s", socket_path, strerror(errno));
            return -1;
        }
        if (got == 0) {
            if (dw_decoder_buffered(dec)) {
                die("the connection ended in the middle of a frame");
                return -1;
            }
            return 0;
        }
        if (dw_decoder_push(dec, chunk, (size_t)got) != 0) {
            die("out of memory");
            return -1;
        }
    }
}

static int refused(const dw_frame *f, const char *when) {
    return die("the master sent ERROR %s %s: %.*s", dw_code_name(f->u.error.code), when, (int)f->u.error.message.len,
               (const char *)f->u.error.message.ptr);
}

/* HELLO as a viewer of unknown size (a viewer's size never changes the session's), then
 * WELCOME. */
static int handshake(int fd, dw_decoder *dec, long deadline) {
    dw_frame hello, f;
    int rc;
    memset(&hello, 0, sizeof hello);
    hello.type = DW_HELLO;
    hello.u.hello.version = DW_PROTOCOL_VERSION;
    hello.u.hello.role = DW_VIEWER;
    if (send_frame(fd, &hello) != 0) return 1;
    rc = next_frame(fd, dec, &f, deadline);
    if (rc < 0) return 1;
    if (rc == 0) return die("%s closed the connection before WELCOME", socket_path);
    if (f.type == DW_ERROR) return refused(&f, "instead of WELCOME");
    if (f.type != DW_WELCOME) {
        dw_frame_free(&f);
        return die("the master's first frame is %s, not WELCOME", dw_type_name(f.type));
    }
    if (f.u.welcome.version != DW_PROTOCOL_VERSION) {
        unsigned v = f.u.welcome.version;
        dw_frame_free(&f);
        return die("the master speaks protocol version %u; deskc speaks %u", v, DW_PROTOCOL_VERSION);
    }
    dw_frame_free(&f);
    return 0;
}

static int answer_ping(int fd, const dw_frame *f) {
    dw_frame pong;
    memset(&pong, 0, sizeof pong);
    pong.type = DW_PONG;
    pong.u.nonce = f->u.nonce;
    return send_frame(fd, &pong);
}

/* Print one screen line as text: every control character in it (C0, DEL, and the C1 controls,
 * U+0080..U+009F, which UTF-8 spells C2 80..C2 9F) becomes '?', as `desk ls` shows them, so a
 * line can neither drive the reader's terminal nor break itself in two. A master's screen
 * model draws no controls; this holds whatever a master sends. Returns 0, or EOF on a write
 * error. */
static int print_line(const unsigned char *p, size_t len) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        if (c < 0x20 || c == 0x7f) {
            if (fputc('?', stdout) == EOF) return EOF;
            i++;
        } else if (c == 0xc2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) {
            if (fputc('?', stdout) == EOF) return EOF;
            i += 2;
        } else {
            if (fputc(c, stdout) == EOF) return EOF;
            i++;
        }
    }
    return fputc('\n', stdout);
}

static int cmd_snapshot(int fd) {
    dw_decoder dec;
    dw_frame req, f;
    long deadline = now_ms() + REQUEST_TIMEOUT_MS;
    int status = 1;
    dw_decoder_init(&dec);
    if (handshake(fd, &dec, deadline) != 0) goto out;
    memset(&req, 0, sizeof req);
    req.type = DW_SNAPSHOT_REQUEST;
    if (send_frame(fd, &req) != 0) goto out;
    for (;;) {
        int rc = next_frame(fd, &dec, &f, deadline);
        if (rc < 0) goto out;
        if (rc == 0) { die("%s closed the connection before the SNAPSHOT", socket_path); goto out; }
        if (f.type == DW_SNAPSHOT) break;
        if (f.type == DW_ERROR) { refused(&f, "instead of SNAPSHOT"); goto out; }
        if (f.type == DW_EXIT) { die("the session exited before it sent the SNAPSHOT"); goto out; }
        if (f.type == DW_PING && answer_ping(fd, &f) != 0) goto out;
        dw_frame_free(&f); /* the keyframe and OUTPUT a viewer is sent meanwhile */
    }
    {
        size_t i;
        const dw_snapshot *s = f.u.snapshot;
        status = 0;
        for (i = 0; i < s->lines_len; i++) {
            if (print_line((const unsigned char *)s->lines[i].ptr, s->lines[i].len) == EOF) break;
        }
        if (fflush(stdout) != 0 && errno != EPIPE) status = die("cannot write to stdout: %s", strerror(errno));
        dw_frame_free(&f);
    }
    memset(&req, 0, sizeof req);
    req.type = DW_DETACH;
    send_frame(fd, &req); /* leaving politely; closing alone would do too */
out:
    dw_decoder_free(&dec);
    return status;
}

static int cmd_stream(int fd) {
    dw_decoder dec;
    dw_frame f;
    int status = 1;
    dw_decoder_init(&dec);
    if (handshake(fd, &dec, now_ms() + REQUEST_TIMEOUT_MS) != 0) goto out;
    for (;;) {
        const dw_bytes *data = NULL;
        int rc = next_frame(fd, &dec, &f, 0);
        if (rc < 0) goto out;
        if (rc == 0) { die("%s closed the connection without EXIT (the master was stopped or dropped us)", socket_path); goto out; }
        if (f.type == DW_OUTPUT) data = &f.u.data;
        else if (f.type == DW_KEYFRAME) data = &f.u.keyframe.data;
        else if (f.type == DW_EXIT) { status = 0; break; }
        else if (f.type == DW_ERROR) {
            /* NOT_PERMITTED and INPUT_FULL leave the connection open, but deskc sends nothing
             * that could earn them; any ERROR ends the stream. */
            refused(&f, "");
            goto out;
        } else if (f.type == DW_PING) {
            if (answer_ping(fd, &f) != 0) goto out;
        }
        /* Anything else (a frame not meant for a viewer) is ignored, as the spec says. */
        if (data && write_all(STDOUT_FILENO, data->ptr, data->len, 0) != 0) {
            if (errno == EPIPE) { status = 0; break; } /* our reader has gone: a clean end */
            die("cannot write to stdout: %s", strerror(errno));
            goto out;
        }
        dw_frame_free(&f);
    }
out:
    dw_decoder_free(&dec);
    return status;
}

int main(int argc, char **argv) {
    int fd = -1, status;
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("deskc %s (desk wire protocol %u)\n", DESKC_VERSION, DW_PROTOCOL_VERSION);
        return 0;
    }
    if (argc != 3 || (strcmp(argv[2], "snapshot") != 0 && strcmp(argv[2], "stream") != 0)) {
        fprintf(stderr, "usage: deskc SOCKET snapshot | deskc SOCKET stream | deskc --version\n");
        return 2;
    }
    /* A peer that goes away must give EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    socket_path = argv[1];
    if (connect_socket(socket_path, &fd) != 0) return 1;
    status = strcmp(argv[2], "snapshot") == 0 ? cmd_snapshot(fd) : cmd_stream(fd);
    close(fd);
    return status;
}
