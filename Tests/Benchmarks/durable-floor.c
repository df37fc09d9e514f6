// The least that haul promises for scenario b of bench.sh, in C, to measure what durability
// itself costs on a machine: 16 threads, each on one kept-alive HTTP/1.1 connection to
// 127.0.0.1:PORT, fetch the paths of a URL list; each body is written to NAME.part, fsync'd
// (unless the third argument is 0), and renamed to NAME in the working directory.
//
//   cc -O2 -pthread -o /tmp/durable-floor Tests/Benchmarks/durable-floor.c
//   cd EMPTY_DIR && /tmp/durable-floor PORT URL_LIST [1|0]
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

static char **paths;
static int count;
static atomic_int next;
static int port;
static int durable = 1;

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
        const char *name = strrchr(paths[i], '/') + 1;
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
        if (rename(part, name) != 0) fail("rename");
    }
    close(s);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: durable-floor PORT URL_LIST [1|0]\n");
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
    pthread_t threads[16];
    for (int k = 0; k < 16; k++) pthread_create(&threads[k], NULL, worker, NULL);
    for (int k = 0; k < 16; k++) pthread_join(threads[k], NULL);
    if (durable) {
        int directory = open(".", O_RDONLY);
        if (directory < 0 || fsync(directory) != 0) fail("fsync of the directory");
    }
    return 0;
}
