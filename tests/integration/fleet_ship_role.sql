-- The shipping role and row-level security that docs/fleet.md ("Roles") gives
-- a DBA: a login in tollgate_ship named ship_NODE inserts and sees only node
-- NODE's rows. Applied by test_fleet_audit.sh and by
-- tests/bench/bench_fleet.sh (SHIP_LOGIN=rls) after `tollgate fleet init`;
-- each then makes its logins.
CREATE ROLE tollgate_ship NOLOGIN;
GRANT SELECT (node, seq), INSERT ON tollgate_audit TO tollgate_ship;
GRANT SELECT ON tollgate_schema TO tollgate_ship;
ALTER TABLE tollgate_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY ship_own_rows ON tollgate_audit FOR INSERT TO tollgate_ship
    WITH CHECK (node = substr(current_user, 6));
CREATE POLICY ship_own_head ON tollgate_audit FOR SELECT TO tollgate_ship
    USING (node = substr(current_user, 6));
GRANT SELECT, INSERT, UPDATE ON tollgate_approvals TO tollgate_ship;
ALTER TABLE tollgate_approvals ENABLE ROW LEVEL SECURITY;
CREATE POLICY ship_own_holds ON tollgate_approvals TO tollgate_ship
    USING (node = substr(current_user, 6)) WITH CHECK (node = substr(current_user, 6));
GRANT SELECT ON tollgate_policy_revisions TO tollgate_ship;
