/*
 * faultshim: an LD_PRELOAD library for the reliability suite (tests/reliability).
 *
 * It owns two things, both limited to regular files under FAULTSHIM_ROOT:
 *
 * 1. Durable images (power-loss model). For every file it remembers the byte range written
 *    since the file's last fsync/fdatasync. When the process syncs the file, that range (read
 *    back from the file) and the file's size are applied to an image kept in FAULTSHIM_SHADOW
 *    under the name "<dev>-<ino>". An image therefore holds exactly what a disk would hold
 *    after a power cut: the content as of the last successful sync, and nothing written after
 *    it. Unsynced files have no image. The test reconstructs a data dir from the images.
 *
 * 2. Fault injection. Once armed (FAULTSHIM_ARM_FILE exists, or faultshim_arm() is called
 *    through ctypes), it counts write-family calls and sync calls on those files and fails the
 *    k-th one (FAULTSHIM_FAIL="write:K:ERRNO:COUNT" or "sync:K:ERRNO:COUNT") with the errno,
 *    without performing it. A failed sync does not update the image.
 *
 * Counters are written to FAULTSHIM_STATS at exit and after every injected fault.
 * Writes through mmap are not seen; SQLite maps only the -shm file, which a power cut loses.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FILES 8192
#define KIND_NONE 0
#define KIND_WRITE 1
#define KIND_SYNC 2

typedef struct {
    int used;
    dev_t dev;
    ino_t ino;
    uint64_t lo; /* dirty range [lo, hi) since the last sync; lo == hi means clean */
    uint64_t hi;
} tracked_file;

static tracked_file files[MAX_FILES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char root[PATH_MAX];
static size_t root_len;
static char shadow[PATH_MAX];
static char arm_file[PATH_MAX];
static char stats_file[PATH_MAX];
static int counting; /* counts run once the arm file exists (or at once without one) */
static int armed;    /* faults are injected: counting and a fault is configured */
static int fail_kind;
static long fail_at;
static int fail_errno = EIO;
static long fail_count = 1;
static long counts[3];
static long injected;

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);

static void write_stats(void);

static void parse_fail(const char *spec) {
    char kind[16] = {0};
    long at = 0, err = EIO, count = 1;
    if (!spec || !*spec) return;
    if (sscanf(spec, "%15[a-z]:%ld:%ld:%ld", kind, &at, &err, &count) < 2) return;
    fail_kind = strcmp(kind, "write") == 0 ? KIND_WRITE : strcmp(kind, "sync") == 0 ? KIND_SYNC : KIND_NONE;
    fail_at = at;
    fail_errno = (int)err;
    fail_count = count;
}

static void copy_env(const char *name, char *target) {
    const char *value = getenv(name);
    if (value) {
        strncpy(target, value, PATH_MAX - 1);
        target[PATH_MAX - 1] = 0;
    }
}

__attribute__((constructor)) static void faultshim_init(void) {
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    copy_env("FAULTSHIM_ROOT", root);
    root_len = strlen(root);
    copy_env("FAULTSHIM_SHADOW", shadow);
    copy_env("FAULTSHIM_ARM_FILE", arm_file);
    copy_env("FAULTSHIM_STATS", stats_file);
    parse_fail(getenv("FAULTSHIM_FAIL"));
    counting = arm_file[0] == 0;
    armed = counting && fail_kind != KIND_NONE;
}

__attribute__((destructor)) static void faultshim_fini(void) { write_stats(); }

/* ------------------------------------------------------------ the file table */

static tracked_file *find(dev_t dev, ino_t ino, int create) {
    size_t start = ((size_t)ino * 2654435761u + (size_t)dev) % MAX_FILES;
    for (size_t i = 0; i < MAX_FILES; i++) {
        tracked_file *f = &files[(start + i) % MAX_FILES];
        if (f->used && f->dev == dev && f->ino == ino) return f;
        if (!f->used) {
            if (!create) return NULL;
            f->used = 1;
            f->dev = dev;
            f->ino = ino;
            f->lo = f->hi = 0;
            return f;
        }
    }
    return NULL;
}

static int under_root(const char *path) {
    return root_len && strncmp(path, root, root_len) == 0 && (path[root_len] == '/' || path[root_len] == 0);
}

static void mark_dirty(tracked_file *f, uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    if (f->lo == f->hi) {
        f->lo = lo;
        f->hi = hi;
        return;
    }
    if (lo < f->lo) f->lo = lo;
    if (hi > f->hi) f->hi = hi;
}

/* Register a freshly opened descriptor when it names a regular file under the root. */
static void on_open(int fd, int flags) {
    char link[64], path[PATH_MAX];
    struct stat st;
    ssize_t n;
    if (fd < 0 || !root_len) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    if (!under_root(path) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    pthread_mutex_lock(&lock);
    tracked_file *f = find(st.st_dev, st.st_ino, 1);
    if (f && (flags & O_TRUNC)) mark_dirty(f, 0, UINT64_MAX);
    pthread_mutex_unlock(&lock);
}

static tracked_file *tracked(int fd) {
    struct stat st;
    if (!root_len || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    return find(st.st_dev, st.st_ino, 0);
}

/* ------------------------------------------------------------ fault injection */

static void check_armed(void) {
    if (!counting && arm_file[0] && access(arm_file, F_OK) == 0) {
        counting = 1;
        armed = fail_kind != KIND_NONE;
        counts[KIND_WRITE] = counts[KIND_SYNC] = 0;
    }
}

/* Count one call of ``kind``; return the errno to fail it with, or 0 to let it run. */
static int should_fail(int kind) {
    int fail = 0;
    pthread_mutex_lock(&lock);
    check_armed();
    if (counting) {
        long n = ++counts[kind];
        if (armed && kind == fail_kind && n >= fail_at && n < fail_at + fail_count) {
            fail = fail_errno;
            injected++;
        }
    }
    pthread_mutex_unlock(&lock);
    if (fail) write_stats();
    return fail;
}

static void write_stats(void) {
    char text[160];
    int fd, len;
    if (!stats_file[0]) return;
    len = snprintf(text, sizeof text, "{\"writes\": %ld, \"syncs\": %ld, \"injected\": %ld, \"counting\": %d}\n",
                   counts[KIND_WRITE], counts[KIND_SYNC], injected, counting);
    fd = real_open(stats_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    if (real_write(fd, text, (size_t)len) < 0) { /* best effort */ }
    close(fd);
}

/* ------------------------------------------------------------ durable images */

static void apply_to_image(int fd, tracked_file *f) {
    char image[PATH_MAX + 64], source[64];
    struct stat st;
    uint64_t lo, hi, size;
    int in, out;
    if (!shadow[0] || fstat(fd, &st) != 0) return;
    size = (uint64_t)st.st_size;
    lo = f->lo;
    hi = f->hi > size ? size : f->hi;
    snprintf(image, sizeof image, "%s/%lu-%lu", shadow, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    snprintf(source, sizeof source, "/proc/self/fd/%d", fd);
    out = real_open(image, O_WRONLY | O_CREAT, 0600);
    if (out < 0) return;
    in = real_open(source, O_RDONLY);
    if (in >= 0) {
        char buffer[1 << 16];
        uint64_t at = lo;
        while (at < hi) {
            size_t want = hi - at < sizeof buffer ? (size_t)(hi - at) : sizeof buffer;
            ssize_t got = pread(in, buffer, want, (off_t)at);
            if (got <= 0) break;
            if (real_pwrite(out, buffer, (size_t)got, (off_t)at) != got) break;
            at += (uint64_t)got;
        }
        close(in);
    }
    if (real_ftruncate(out, (off_t)size) != 0) { /* best effort */ }
    close(out);
    f->lo = f->hi = 0;
}

static int synced(int fd, int (*real)(int)) {
    tracked_file *f = tracked(fd);
    int err, rc;
    if (!f) return real(fd);
    err = should_fail(KIND_SYNC);
    if (err) {
        errno = err;
        return -1;
    }
    pthread_mutex_lock(&lock);
    rc = real(fd);
    if (rc == 0) apply_to_image(fd, f);
    pthread_mutex_unlock(&lock);
    return rc;
}

static void forget_image(const char *path, int dirfd) {
    struct stat st;
    char image[PATH_MAX + 64];
    if (!root_len || fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) return;
    pthread_mutex_lock(&lock);
    tracked_file *f = find(st.st_dev, st.st_ino, 0);
    if (f) {
        f->lo = f->hi = 0;
        if (shadow[0]) {
            snprintf(image, sizeof image, "%s/%lu-%lu", shadow, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
            real_unlink(image);
        }
    }
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------ interposed calls */

#define MODE_ARG(flags, mode)                          \
    do {                                               \
        if ((flags) & (O_CREAT | __O_TMPFILE)) {       \
            va_list ap;                                \
            va_start(ap, flags);                       \
            mode = va_arg(ap, int);                    \
            va_end(ap);                                \
        }                                              \
    } while (0)

int open(const char *path, int flags, ...) {
    int mode = 0, fd;
    MODE_ARG(flags, mode);
    fd = real_open(path, flags, mode);
    on_open(fd, flags);
    return fd;
}

int open64(const char *path, int flags, ...) {
    int mode = 0, fd;
    MODE_ARG(flags, mode);
    fd = real_open64(path, flags, mode);
    on_open(fd, flags);
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...) {
    int mode = 0, fd;
    MODE_ARG(flags, mode);
    fd = real_openat(dirfd, path, flags, mode);
    on_open(fd, flags);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...) {
    int mode = 0, fd;
    MODE_ARG(flags, mode);
    fd = real_openat64(dirfd, path, flags, mode);
    on_open(fd, flags);
    return fd;
}

static ssize_t written(int fd, uint64_t offset, ssize_t n, tracked_file *f) {
    if (n > 0) {
        pthread_mutex_lock(&lock);
        mark_dirty(f, offset, offset + (uint64_t)n);
        pthread_mutex_unlock(&lock);
    }
    (void)fd;
    return n;
}

ssize_t write(int fd, const void *buf, size_t count) {
    tracked_file *f = tracked(fd);
    int err;
    off_t offset;
    if (!f) return real_write(fd, buf, count);
    err = should_fail(KIND_WRITE);
    if (err) {
        errno = err;
        return -1;
    }
    offset = (fcntl(fd, F_GETFL) & O_APPEND) ? lseek(fd, 0, SEEK_END) : lseek(fd, 0, SEEK_CUR);
    return written(fd, (uint64_t)offset, real_write(fd, buf, count), f);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    tracked_file *f = tracked(fd);
    int err;
    if (!f) return real_pwrite(fd, buf, count, offset);
    err = should_fail(KIND_WRITE);
    if (err) {
        errno = err;
        return -1;
    }
    return written(fd, (uint64_t)offset, real_pwrite(fd, buf, count, offset), f);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    tracked_file *f = tracked(fd);
    int err;
    if (!f) return real_pwrite64(fd, buf, count, offset);
    err = should_fail(KIND_WRITE);
    if (err) {
        errno = err;
        return -1;
    }
    return written(fd, (uint64_t)offset, real_pwrite64(fd, buf, count, offset), f);
}

static int truncated(int fd, uint64_t length, int rc) {
    tracked_file *f;
    if (rc == 0 && (f = tracked(fd)) != NULL) {
        pthread_mutex_lock(&lock);
        mark_dirty(f, length, UINT64_MAX);
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

int ftruncate(int fd, off_t length) { return truncated(fd, (uint64_t)length, real_ftruncate(fd, length)); }

int ftruncate64(int fd, off64_t length) { return truncated(fd, (uint64_t)length, real_ftruncate64(fd, length)); }

int fsync(int fd) { return synced(fd, real_fsync); }

int fdatasync(int fd) { return synced(fd, real_fdatasync); }

int unlink(const char *path) {
    forget_image(path, AT_FDCWD);
    return real_unlink(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    if (!(flags & AT_REMOVEDIR)) forget_image(path, dirfd);
    return real_unlinkat(dirfd, path, flags);
}

/* ------------------------------------------------------------ control through ctypes */

void faultshim_arm(int kind, long at, int err, long count) {
    pthread_mutex_lock(&lock);
    fail_kind = kind;
    fail_at = at;
    fail_errno = err;
    fail_count = count;
    counting = 1;
    armed = kind != KIND_NONE;
    arm_file[0] = 0;
    counts[KIND_WRITE] = counts[KIND_SYNC] = 0;
    injected = 0;
    pthread_mutex_unlock(&lock);
}

void faultshim_disarm(void) {
    pthread_mutex_lock(&lock);
    fail_kind = KIND_NONE;
    armed = 0;
    pthread_mutex_unlock(&lock);
}

long faultshim_count(int kind) { return kind == KIND_WRITE || kind == KIND_SYNC ? counts[kind] : injected; }

void faultshim_set_root(const char *new_root, const char *new_shadow) {
    pthread_mutex_lock(&lock);
    strncpy(root, new_root, PATH_MAX - 1);
    root_len = strlen(root);
    strncpy(shadow, new_shadow, PATH_MAX - 1);
    memset(files, 0, sizeof files);
    pthread_mutex_unlock(&lock);
}
