/* A chat with solo's engine in this process, through libsolo (include/solo.h).
 *
 *   cargo build -p solo-capi
 *   cc -pthread -I include examples/c/chat.c -L target/debug -lsolo -o chat && LD_LIBRARY_PATH=target/debug ./chat
 *
 * With no argument it runs the built-in demo checkpoint; `./chat DIR` runs the checkpoint in DIR.
 * It streams one answer to stdout, cancels a long one from another thread, then shows the
 * tokenizer and the privacy gate. Exit status 0 when every step worked (scripts/test runs it).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "solo.h"

/* Each event is one `chat.completion.chunk` (JSON). A real program would use a JSON parser; this
 * one only counts the chunks and prints the raw JSON of the content deltas. */
struct tally {
    int chunks;
    int content;
};

static void on_event(const char *chunk_json, void *user_data) {
    struct tally *t = user_data;
    t->chunks++;
    if (strstr(chunk_json, "\"content\":\"") != NULL) {
        t->content++;
        printf("%s\n", chunk_json);
    }
}

/* Cancels a request from another thread once it has streamed a few chunks. */
static void *cancel_soon(void *request) {
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    solo_cancel(request);
    return NULL;
}

static void count_chunk(const char *chunk_json, void *user_data) {
    (void)chunk_json;
    ++*(int *)user_data;
}

static int check(solo_status status, solo_error *err, const char *what) {
    if (status == SOLO_OK) return 0;
    fprintf(stderr, "%s failed (%d): %s\n", what, (int)status, err->message ? err->message : "");
    solo_error_free(err);
    return 1;
}

int main(int argc, char **argv) {
    solo_error err = {0};
    solo_engine *engine = NULL;
    const char *model = argc > 1 ? argv[1] : NULL; /* NULL: the demo checkpoint */
    if (check(solo_engine_open(model, "{\"backend\": \"cpu\"}", NULL, NULL, &engine, &err), &err, "open")) return 1;

    char *info = NULL;
    if (check(solo_engine_info(engine, &info, &err), &err, "info")) return 1;
    printf("libsolo %s: %s\n", solo_version(), info);
    solo_string_free(info);

    const char *request =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"What color is the sky?\"}],"
        " \"stream\": true, \"max_tokens\": 64, \"temperature\": 0}";
    struct tally tally = {0, 0};
    solo_request *req = NULL;
    if (check(solo_chat(engine, request, on_event, &tally, &req, &err), &err, "chat")) return 1;
    if (check(solo_wait(req, &err), &err, "wait")) return 1;
    solo_request_free(req);
    printf("%d chunks, %d with content\n", tally.chunks, tally.content);
    if (tally.content == 0) {
        fprintf(stderr, "no content came back\n");
        return 1;
    }

    /* A bad request fails with its own status and a message. */
    solo_status bad = solo_chat(engine, "{\"messages\": 3}", NULL, NULL, &req, &err);
    if (bad != SOLO_INVALID_REQUEST || err.message == NULL) {
        fprintf(stderr, "a bad request was not refused as one (%d)\n", (int)bad);
        return 1;
    }
    printf("refused as expected: %s\n", err.message);
    solo_error_free(&err);

    /* A long completion (the end-of-text tokens biased away), cancelled from another thread. */
    uint32_t *ids = NULL;
    size_t n = 0;
    if (check(solo_tokenize(engine, "<|im_end|><|endoftext|>", &ids, &n, &err), &err, "tokenize")) return 1;
    char long_request[256];
    snprintf(long_request, sizeof long_request,
             "{\"prompt\": \"Once\", \"max_tokens\": 5000, \"stream\": true, \"logit_bias\": {\"%u\": -100, \"%u\": -100}}",
             ids[0], n > 1 ? ids[1] : ids[0]);
    solo_tokens_free(ids, n);
    int streamed = 0;
    if (check(solo_completion(engine, long_request, count_chunk, &streamed, &req, &err), &err, "completion")) return 1;
    pthread_t canceller;
    pthread_create(&canceller, NULL, cancel_soon, req);
    solo_status ended = solo_wait(req, &err);
    pthread_join(canceller, NULL);
    solo_request_free(req);
    printf("cancelled from another thread after %d chunks: status %d (%s)\n", streamed, (int)ended,
           err.message ? err.message : "");
    solo_error_free(&err);
    if (ended != SOLO_CANCELLED || streamed >= 5000) return 1;

    if (check(solo_tokenize(engine, "Hello, world", &ids, &n, &err), &err, "tokenize")) return 1;
    char *back = NULL;
    if (check(solo_detokenize(engine, ids, n, &back, &err), &err, "detokenize")) return 1;
    printf("%zu tokens, back to \"%s\"\n", n, back);
    int same = strcmp(back, "Hello, world") == 0;
    solo_string_free(back);
    solo_tokens_free(ids, n);
    if (!same) return 1;

    char *report = NULL;
    if (check(solo_gate_check(engine, "mail me at jane.doe@example.com", &report, &err), &err, "gate")) return 1;
    printf("gate: %s\n", report);
    int found = strstr(report, "EMAIL") != NULL;
    solo_string_free(report);

    solo_engine_close(engine);
    return found ? 0 : 1;
}
