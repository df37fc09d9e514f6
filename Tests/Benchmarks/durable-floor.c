// The least that haul promises for scenario b of bench.sh, in C, to measure what durability
// itself costs on a machine: 16 threads, each on one kept-alive HTTP/1.1 connection to
// 127.0.0.1:PORT, fetch the paths of a URL list; each body is written to NAME.part, fsync'd
// (unless the third argument is 0), and renamed to NAME in the working directory.
//
//   cc -O2 -pthread -o /tmp/durable-floor Tests/Benchmarks/durable-floor.c
//   cd EMPTY_DIR && /tmp/durable-floor PORT URL_LIST [1|0]
//
// Built with -DWITH_STORE (and -lsqlite3), it also keeps the queue as haul must: every URL's row
// is inserted into DATABASE (the fourth argument, default queue.sqlite; WAL, synchronous = FULL)
// before the first request, and each file's row is committed as completed after its fsync and
// before the file takes its name. The commits
// run on a thread of their own, which takes every completion that is waiting into one transaction
// and then renames those files; a fetching thread hands its file over and goes on to the next URL
// (haul goes further: it gives a download's slot to the next once its bytes are written, and
// syncs them after).
//
//   cc -O2 -pthread -DWITH_STORE -o /tmp/durable-floor-db Tests/Benchmarks/durable-floor.c -lsqlite3
//   cd EMPTY_DIR && /tmp/durable-floor-db PORT URL_LIST 1 DATABASE
//
// Not a client: it expects plain 200 answers with Content-Length, as nginx gives for files.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef WITH_STORE
#include <sqlite3.h>
#endif

static char **paths;
static int count;
static atomic_int next;
static int port;
static int durable = 1;

/// The file name of URL path `i`: what follows its last slash.
static const char *nameOf(int i) { return strrchr(paths[i], '/') + 1; }

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static int connectLocal(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (s < 0 || connect(s, (struct sockaddr *)&address, sizeof address) != 0) fail("connect");
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
}

#ifdef WITH_STORE
static sqlite3 *db;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t due = PTHREAD_COND_INITIALIZER;
static int *waiting;  // indexes into paths of files synced and not yet committed
static int waitingCount, stopping;

static void sql(const char *text) {
    char *error = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "sqlite: %s\n", error ? error : "?");
        exit(1);
    }
}

static sqlite3_stmt *prepare(const char *text) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, text, -1, &statement, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db));
        exit(1);
    }
    return statement;
}

static void step(sqlite3_stmt *statement) {
    if (sqlite3_step(statement) != SQLITE_DONE) {
        fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db));
        exit(1);
    }
    sqlite3_reset(statement);
}

static void *committer(void *unused) {
    (void)unused;
    sqlite3_stmt *update = prepare("UPDATE downloads SET state = 'completed', bytes = ? WHERE id = ?");
    int *batch = malloc(sizeof(int) * count);
    pthread_mutex_lock(&lock);
    for (;;) {
        while (waitingCount == 0 && !stopping) pthread_cond_wait(&due, &lock);
        if (waitingCount == 0) break;
        int n = waitingCount;
        memcpy(batch, waiting, sizeof(int) * n);
        waitingCount = 0;
        pthread_mutex_unlock(&lock);
        sql("BEGIN");
        for (int k = 0; k < n; k++) {
            sqlite3_bind_int64(update, 1, 102400);
            sqlite3_bind_int(update, 2, batch[k] + 1);
            step(update);
        }
        sql("COMMIT");
        for (int k = 0; k < n; k++) {
            char part[1024];
            snprintf(part, sizeof part, "%s.part", nameOf(batch[k]));
            if (rename(part, nameOf(batch[k])) != 0) fail("rename");
        }
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void openStore(const char *path) {
    if (sqlite3_open(path, &db) != SQLITE_OK) fail(path);
    sql("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;");
    sql("CREATE TABLE downloads (id INTEGER PRIMARY KEY, url TEXT NOT NULL, state TEXT NOT NULL, bytes INTEGER NOT NULL)");
    sqlite3_stmt *insert = prepare("INSERT INTO downloads (id, url, state, bytes) VALUES (?, ?, 'queued', 0)");
    sql("BEGIN");
    for (int k = 0; k < count; k++) {
        sqlite3_bind_int(insert, 1, k + 1);
        sqlite3_bind_text(insert, 2, paths[k], -1, SQLITE_STATIC);
        step(insert);
    }
    sql("COMMIT");
    sqlite3_finalize(insert);
    waiting = malloc(sizeof(int) * count);
}
#endif

static void writeAll(int fd, const char *bytes, long length) {
    while (length > 0) {
        ssize_t written = write(fd, bytes, length);
        if (written <= 0) fail("write");
        bytes += written;
        length -= written;
    }
}

static void *worker(void *unused) {
    (void)unused;
    static __thread char buffer[256 * 1024];
    int s = connectLocal();
    for (int i; (i = atomic_fetch_add(&next, 1)) < count;) {
        char request[1024];
        int length = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", paths[i], port);
        writeAll(s, request, length);
        int have = 0;
        char *end = NULL;
        while (!end) {
            ssize_t got = read(s, buffer + have, sizeof buffer - 1 - have);
            if (got <= 0) fail("read head");
            have += got;
            buffer[have] = 0;
            end = strstr(buffer, "\r\n\r\n");
        }
        char *field = strcasestr(buffer, "content-length:");
        if (!field || strncmp(buffer, "HTTP/1.1 200", 12) != 0) fail("not a 200 with Content-Length");
        long left = atol(field + 15);
        char *body = end + 4;
        long held = have - (body - buffer);
        const char *name = nameOf(i);
        char part[1024];
        snprintf(part, sizeof part, "%s.part", name);
        int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) fail("open");
        writeAll(fd, body, held);
        left -= held;
        while (left > 0) {
            ssize_t got = read(s, buffer, left < (long)sizeof buffer ? left : (long)sizeof buffer);
            if (got <= 0) fail("read body");
            writeAll(fd, buffer, got);
            left -= got;
        }
        if (durable && fsync(fd) != 0) fail("fsync");
        close(fd);
#ifdef WITH_STORE
        pthread_mutex_lock(&lock);
        waiting[waitingCount++] = i;
        pthread_cond_signal(&due);
        pthread_mutex_unlock(&lock);
#else
        if (rename(part, name) != 0) fail("rename");
#endif
    }
    close(s);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: durable-floor PORT URL_LIST [1|0] [DATABASE]\n");
        return 2;
    }
    port = atoi(argv[1]);
    durable = argc < 4 || atoi(argv[3]) != 0;
    FILE *list = fopen(argv[2], "r");
    if (!list) fail("URL list");
    char line[1024];
    paths = malloc(sizeof(char *) * 1000000);
    while (fgets(line, sizeof line, list) && count < 1000000) {
        line[strcspn(line, "\n")] = 0;
        char *path = strstr(line, "://");
        path = path ? strchr(path + 3, '/') : NULL;
        if (path && strrchr(path, '/')[1]) paths[count++] = strdup(path);
    }
#ifdef WITH_STORE
    openStore(argc > 4 ? argv[4] : "queue.sqlite");
    pthread_t store;
    pthread_create(&store, NULL, committer, NULL);
#endif
    pthread_t threads[16];
    for (int k = 0; k < 16; k++) pthread_create(&threads[k], NULL, worker, NULL);
    for (int k = 0; k < 16; k++) pthread_join(threads[k], NULL);
#ifdef WITH_STORE
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&due);
    pthread_mutex_unlock(&lock);
    pthread_join(store, NULL);
    sqlite3_close(db);
#endif
    if (durable) {
        int directory = open(".", O_RDONLY);
        if (directory < 0 || fsync(directory) != 0) fail("fsync of the directory");
    }
    return 0;
}
