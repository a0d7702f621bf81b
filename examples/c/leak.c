/* No leak across engines: open the demo engine, chat, close, N times (argv[1], default 200),
 * and check that the resident set size stops growing: RSS after the last cycle minus RSS after
 * the first tenth of them (the allocator's pools and caches are warm by then) must stay under
 * argv[2] MiB (default 8). Prints the numbers; exit status 1 when the bound is passed.
 * scripts/test runs 200 cycles; scripts/capi_leak.sh runs 10,000. Linux (/proc/self/statm). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "solo.h"

static double rss_mib(void) {
    long pages_total = 0, pages_resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) {
        fprintf(stderr, "cannot read /proc/self/statm\n");
        exit(2);
    }
    fclose(f);
    return (double)pages_resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static void on_event(const char *chunk_json, void *user_data) {
    (void)chunk_json;
    ++*(int *)user_data;
}

int main(int argc, char **argv) {
    int cycles = argc > 1 ? atoi(argv[1]) : 200;
    double bound = argc > 2 ? atof(argv[2]) : 8.0;
    int warm = cycles / 10 > 0 ? cycles / 10 : 1;
    const char *request = "{\"messages\": [{\"role\": \"user\", \"content\": \"Name a colour.\"}],"
                          " \"stream\": true, \"max_tokens\": 4, \"temperature\": 0}";
    double start = 0, warm_rss = 0;
    for (int i = 0; i < cycles; i++) {
        solo_error err = {0};
        solo_engine *engine = NULL;
        solo_request *req = NULL;
        int events = 0;
        if (solo_engine_open(NULL, "{\"backend\": \"cpu\", \"threads\": 1}", NULL, NULL, &engine, &err) != SOLO_OK ||
            solo_chat(engine, request, on_event, &events, &req, &err) != SOLO_OK || solo_wait(req, &err) != SOLO_OK) {
            fprintf(stderr, "cycle %d failed: %s\n", i, err.message ? err.message : "");
            return 2;
        }
        solo_request_free(req);
        solo_engine_close(engine);
        if (events == 0) {
            fprintf(stderr, "cycle %d: no events\n", i);
            return 2;
        }
        if (i == 0) start = rss_mib();
        if (i + 1 == warm) warm_rss = rss_mib();
    }
    double end = rss_mib();
    printf("%d open/chat/close cycles: RSS %.1f MiB after the first, %.1f after %d, %.1f after the last "
           "(growth after warm-up %.2f MiB, bound %.1f)\n",
           cycles, start, warm_rss, warm, end, end - warm_rss, bound);
    return end - warm_rss > bound ? 1 : 0;
}
