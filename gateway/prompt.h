/*
 * The terminal prompt: with a controlling terminal, `tollgate run` asks about
 * each pending approval on /dev/tty (never on stdout), one question at a
 * time, as events on the run's loop: one key answers (o, a, d), a countdown
 * shows the time left. Other channels may decide meanwhile.
 */
#ifndef TOLLGATE_GW_PROMPT_H
#define TOLLGATE_GW_PROMPT_H

#include <stdbool.h>

struct event_base;
struct approvals;
struct gw_prompt;

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
/*
 * hold(arg, true) is called before a question is drawn and hold(arg, false)
 * once it is gone: the owner holds whatever else writes to or reads from
 * the terminal (the sandbox's output and input) meanwhile.
 */
typedef void (*gw_prompt_hold_fn)(void *arg, bool held);
void gw_prompt_set_hold(struct gw_prompt *p, gw_prompt_hold_fn hold, void *arg);
/*
 * Whether p asks at all now: its terminal is there and tollgate is in its
 * foreground (a background job never reads it). False for NULL. What the
 * prompt asks and answers, gateway/refusals.h does not say again.
 */
bool gw_prompt_asks(const struct gw_prompt *p);
/* Stops listening, restores the terminal's modes, closes it. Accepts NULL. */
void gw_prompt_free(struct gw_prompt *p);

#endif
