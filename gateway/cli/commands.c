/*
 * The command table: the order here is the order of `tollgate --help`.
 */
#include "gateway/cli/cli.h"

extern const struct gw_command gw_command_run;
extern const struct gw_command gw_command_wrap;
extern const struct gw_command gw_command_serve;
extern const struct gw_command gw_command_proxy;
extern const struct gw_command gw_command_pool;
extern const struct gw_command gw_command_policy;
extern const struct gw_command gw_command_audit;
extern const struct gw_command gw_command_fleet;
extern const struct gw_command gw_command_pending;
extern const struct gw_command gw_command_approve;
extern const struct gw_command gw_command_deny;
extern const struct gw_command gw_command_stats;
extern const struct gw_command gw_command_events;
extern const struct gw_command gw_command_ui;
extern const struct gw_command gw_command_vault;
extern const struct gw_command gw_command_key;
extern const struct gw_command gw_command_verify;
extern const struct gw_command gw_command_runtimes;
extern const struct gw_command gw_command_validate;
extern const struct gw_command gw_command_image;

const struct gw_command *const gw_commands[] = {
	&gw_command_run,
	&gw_command_wrap,
	&gw_command_serve,
	&gw_command_proxy,
	&gw_command_pool,
	&gw_command_policy,
	&gw_command_audit,
	&gw_command_fleet,
	&gw_command_pending,
	&gw_command_approve,
	&gw_command_deny,
	&gw_command_stats,
	&gw_command_events,
	&gw_command_ui,
	&gw_command_vault,
	&gw_command_key,
	&gw_command_verify,
	&gw_command_runtimes,
	&gw_command_validate,
	&gw_command_image,
	NULL,
};
