/*
 * The terminal prompt: with a controlling terminal, `tollgate run` asks about
 * each pending approval on /dev/tty (never on stdout), one question at a
 * time, as events on the run's loop. Other channels may decide meanwhile.
 */
#ifndef TOLLGATE_GW_PROMPT_H
#define TOLLGATE_GW_PROMPT_H

struct event_base;
struct approvals;
struct gw_prompt;

#define GW_PROMPT_ANSWER_MAX 128  /* bytes of an answer line; the rest is dropped */
#define GW_PROMPT_QUEUE_MAX 64    /* approvals waiting for their question */
#define GW_PROMPT_COMMAND_MAX 160 /* characters of the command shown */

/*
 * Opens the controlling terminal and listens to a's pending approvals.
 * argv is the sandboxed command, shown in each question (copied). 0, or
 * negative errno: -ENXIO when there is no controlling terminal (then there
 * is no prompt and the control socket is the only channel).
 */
int gw_prompt_open(struct event_base *base, struct approvals *a, char *const *argv,
                   struct gw_prompt **out);
/* Stops listening, restores the terminal's modes, closes it. Accepts NULL. */
void gw_prompt_free(struct gw_prompt *p);

#endif
