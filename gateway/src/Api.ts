import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Option, Schema, SchemaAST } from "effect"
import { Authentication, SessionAuthentication } from "./Authentication.js"
import { BadRequest, Conflict, Forbidden, InternalError, NotFound, TooManyRequests, Unauthorized, Unavailable, ValidationError } from "./errors.js"
import * as B from "./billingSchemas.js"
import * as C from "./connectorSchemas.js"
import * as E from "./environmentSchemas.js"
import * as P from "./projectSchemas.js"
import * as S from "./schemas.js"

const sessionOnly = "Dashboard session only: an API key gets 401."
const extension = { "x-scion-extension": true }

/** A success answered with 201, still documented as its own component (re-annotating drops it otherwise). */
const created = <A, I, R>(schema: Schema.Schema<A, I, R>): Schema.Schema<A, I, R> =>
  schema.annotations({
    ...Option.match(SchemaAST.getIdentifierAnnotation(schema.ast), { onNone: () => ({}), onSome: (identifier) => ({ identifier }) }),
    ...HttpApiSchema.annotations({ status: 201 })
  })

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("signUp", "/auth/signup")
      .setPayload(S.SignUpRequest)
      .addSuccess(created(S.SessionGrant))
      .annotate(OpenApi.Summary, "Create an account and a dashboard session")
  )
  .add(
    HttpApiEndpoint.post("logIn", "/auth/login")
      .setPayload(S.LogInRequest)
      .addSuccess(S.SessionGrant)
      .annotate(OpenApi.Summary, "Exchange email and password for a dashboard session")
      .annotate(OpenApi.Description, "Wrong credentials answer 401 with the same body whether the email exists or not.")
  )
  .add(
    HttpApiEndpoint.post("logOut", "/auth/logout")
      .addSuccess(HttpApiSchema.NoContent)
      .middleware(Authentication)
      .annotate(OpenApi.Summary, "End the calling session; the token stops working at once")
  )
  .add(
    HttpApiEndpoint.post("verifyEmail", "/auth/verify-email")
      .setPayload(S.VerifyEmailRequest)
      .addSuccess(S.User)
      .annotate(OpenApi.Summary, "Mark an email verified with the token mailed to it")
  )
  .annotateEndpoints(OpenApi.Override, extension)
  .annotateContext(
    OpenApi.annotations({
      description: "Extension (not part of the service interface): how dashboard sessions are issued.",
      override: extension
    })
  ) {}

export class SessionGroup extends HttpApiGroup.make("session")
  .add(HttpApiEndpoint.get("me", "/me").addSuccess(S.Me).annotate(OpenApi.Summary, "The caller's profile and whether it has orgs"))
  .add(HttpApiEndpoint.patch("updateMe", "/me").setPayload(S.UpdateMeRequest).addSuccess(S.User).annotate(OpenApi.Summary, "Change the full name"))
  .add(
    HttpApiEndpoint.del("deleteMe", "/me")
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Delete the account")
      .annotate(
        OpenApi.Description,
        "Removes memberships, role grants, the user's API keys, the profile and the auth account. 400 when the user is the sole owner of any org (the detail names them)."
      )
  )
  .add(
    HttpApiEndpoint.get("bootstrap", "/bootstrap")
      .setHeaders(S.OrgHeader)
      .addSuccess(S.Bootstrap)
      .annotate(OpenApi.Summary, "Everything a dashboard needs to start in one org")
  )
  .add(HttpApiEndpoint.get("myOrgs", "/my-orgs").addSuccess(S.MyOrgs).annotate(OpenApi.Summary, "The caller's orgs"))
  .middleware(SessionAuthentication)
  .annotateContext(OpenApi.annotations({ description: `The caller's own account. ${sessionOnly}` })) {}

export class OrgsGroup extends HttpApiGroup.make("orgs")
  .add(
    HttpApiEndpoint.get("list", "/orgs")
      .addSuccess(Schema.Array(S.OrgMembership))
      .middleware(SessionAuthentication)
      .annotate(OpenApi.Summary, "The caller's org memberships")
      .annotate(OpenApi.Description, sessionOnly)
  )
  .add(
    HttpApiEndpoint.post("create", "/orgs")
      .setPayload(S.CreateOrgRequest)
      .addSuccess(created(S.OrgDetails))
      .middleware(SessionAuthentication)
      .annotate(OpenApi.Summary, "Create an org; the caller becomes its owner")
      .annotate(OpenApi.Description, sessionOnly)
  )
  .add(
    HttpApiEndpoint.get("get", "/orgs/:org_id")
      .setPath(S.OrgPath)
      .addSuccess(S.OrgDetails)
      .middleware(Authentication)
      .annotate(OpenApi.Summary, "Org details; 403 when the caller is not a member")
  )
  .add(
    HttpApiEndpoint.patch("update", "/orgs/:org_id")
      .setPath(S.OrgPath)
      .setPayload(S.UpdateOrgRequest)
      .addSuccess(S.OrgDetails)
      .middleware(Authentication)
      .annotate(OpenApi.Summary, "Rename an org (org.update)")
  )
  .add(
    HttpApiEndpoint.del("delete", "/orgs/:org_id")
      .setPath(S.OrgPath)
      .addSuccess(HttpApiSchema.NoContent)
      .middleware(Authentication)
      .annotate(OpenApi.Summary, "Delete an org (org.delete)")
      .annotate(OpenApi.Description, "Irreversibly removes memberships, role grants, API keys and invites. 400 when it is the caller's last org.")
  ) {}

export class MembersGroup extends HttpApiGroup.make("members")
  .add(HttpApiEndpoint.get("listMembers", "/orgs/:org_id/members").setPath(S.OrgPath).addSuccess(Schema.Array(S.Member)).annotate(OpenApi.Summary, "The org's members"))
  .add(
    HttpApiEndpoint.patch("updateMemberRole", "/orgs/:org_id/members/:target_user_id")
      .setPath(S.MemberPath)
      .setPayload(S.UpdateMemberRoleRequest)
      .addSuccess(S.MemberRoleUpdated)
      .annotate(OpenApi.Summary, "Change a member's role (orgs.share); the last owner cannot be demoted")
  )
  .add(
    HttpApiEndpoint.del("removeMember", "/orgs/:org_id/members/:target_user_id")
      .setPath(S.MemberPath)
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Remove a member (org.remove_members); the last owner cannot be removed")
  )
  .add(
    HttpApiEndpoint.post("createInvite", "/orgs/:org_id/invite")
      .setPath(S.OrgPath)
      .setPayload(S.CreateInviteRequest)
      .addSuccess(S.Invite)
      .annotate(OpenApi.Summary, "Invite someone by email (orgs.invite_users)")
  )
  .add(HttpApiEndpoint.get("listInvites", "/orgs/:org_id/invites").setPath(S.OrgPath).addSuccess(Schema.Array(S.Invite)).annotate(OpenApi.Summary, "The org's pending invites"))
  .add(
    HttpApiEndpoint.del("revokeInvite", "/orgs/:org_id/invites/:invite_id")
      .setPath(S.InvitePath)
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Revoke a pending invite (orgs.invite_users)")
  )
  .add(HttpApiEndpoint.get("listRoles", "/orgs/:org_id/roles").setPath(S.OrgPath).addSuccess(Schema.Array(S.Role)).annotate(OpenApi.Summary, "The org's roles and their permissions"))
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Members, invites and roles of an org." })) {}

export class InvitesGroup extends HttpApiGroup.make("invites")
  .add(
    HttpApiEndpoint.get("pending", "/invites/pending")
      .addSuccess(S.PendingInvites)
      .annotate(OpenApi.Summary, "Invites addressed to the caller's verified emails")
  )
  .add(
    HttpApiEndpoint.post("accept", "/invites/:invite_token/accept")
      .setPath(S.InviteTokenPath)
      .addSuccess(S.InviteAccepted)
      .annotate(OpenApi.Summary, "Accept an invite and join its org")
  )
  .middleware(SessionAuthentication)
  .annotateContext(OpenApi.annotations({ description: `Invites addressed to the caller. ${sessionOnly}` })) {}

export class ApiKeysGroup extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/orgs/:org_id/api-keys")
      .setPath(S.OrgPath)
      .addSuccess(Schema.Array(S.ApiKey))
      .annotate(OpenApi.Summary, "The org's API keys (api_keys.read): active first, newest first, then revoked; no secrets")
  )
  .add(
    HttpApiEndpoint.post("create", "/orgs/:org_id/api-keys")
      .setPath(S.OrgPath)
      .setPayload(S.CreateApiKeyRequest)
      .addSuccess(created(S.CreatedApiKey))
      .annotate(OpenApi.Summary, "Create an API key (api_keys.create); the secret is returned once")
      .annotate(OpenApi.Description, "400 for an unknown role, a non-org role, or a scope outside the role's permissions.")
  )
  .add(
    HttpApiEndpoint.del("revoke", "/orgs/:org_id/api-keys/:api_key_id")
      .setPath(S.ApiKeyPath)
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Summary, "Revoke an API key (api_keys.delete); 404 when not found or already revoked")
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ title: "api-keys", description: "Org API keys." })) {}

export class OperationsGroup extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("get", "/operations/:operation_id")
      .setPath(S.OperationPath)
      .setUrlParams(S.OperationQuery)
      .addSuccess(S.Operation)
      .annotate(OpenApi.Summary, "Poll an operation; with wait, hold until it is completed or failed")
      .annotate(
        OpenApi.Description,
        "Any authenticated caller of the operation's org (an API key of that org, or a member's session). An unknown operation and another org's operation both answer 404. " +
          "With wait=N (integer 0..10) the request is held until the operation reaches completed or failed, or N seconds pass, and answers the state at that moment; any other wait value is 422."
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Long-running operations (discovery, engine setup, connector deletion, branch creation, …)." })) {}

const billingAccess = "Any member of the org (billing.read), or an API key of the org."
const billingManage = "Owners only (billing.manage): others, and API keys whose role lacks it, get 403. A non-member gets 403."

export class BillingPlansGroup extends HttpApiGroup.make("billingPlans")
  .add(
    HttpApiEndpoint.get("list", "/billing/plans")
      .addSuccess(B.PlanList)
      .annotate(OpenApi.Summary, "The self-serve plans with their limits and prices")
      .annotate(OpenApi.Description, "Public: needs no token. Plan ids: free, pro, team. Prices and credits are in US cents; a null limit is unlimited.")
  )
  .annotateEndpoints(OpenApi.Override, extension)
  .annotateContext(
    OpenApi.annotations({ title: "billing-plans", description: "Extension (not part of the service interface): the plan list a user chooses from.", override: extension })
  ) {}

export class BillingGroup extends HttpApiGroup.make("billing")
  .add(
    HttpApiEndpoint.post("selectPlan", "/orgs/:org_id/billing/subscriptions")
      .setPath(S.OrgPath)
      .setPayload(B.SelectPlanRequest)
      .addSuccess(B.Subscription)
      .annotate(OpenApi.Summary, "Select a plan (owner only)")
      .annotate(
        OpenApi.Description,
        `${billingManage} An unknown plan_id is 400. Free applies at once. A paid plan goes through the payment provider: with the default (local) adapter it is active at once and checkout_url is null; with a hosted checkout (Stripe) status is pending_checkout and checkout_url is where to send the user, and the previous plan applies until the checkout completes. Selecting the plan the org is on changes nothing but clears a scheduled cancel.`
      )
  )
  .add(
    HttpApiEndpoint.get("getSubscription", "/orgs/:org_id/billing/subscription")
      .setPath(S.OrgPath)
      .addSuccess(B.Subscription)
      .annotate(OpenApi.Summary, "The org's subscription and credit balance")
      .annotate(
        OpenApi.Description,
        `${billingAccess} Billing sets a new org up asynchronously, moments after POST /v1/orgs; until then this is 404 (retry shortly).`
      )
  )
  .add(
    HttpApiEndpoint.del("cancelSubscription", "/orgs/:org_id/billing/subscription")
      .setPath(S.OrgPath)
      .setUrlParams(B.CancelQuery)
      .addSuccess(B.Subscription)
      .annotate(OpenApi.Summary, "Cancel the subscription at the period end, or now (owner only)")
      .annotate(
        OpenApi.Description,
        `${billingManage} immediate=false (default) sets cancel_at_period_end; immediate=true cancels now: status canceled, plan free (its limits apply) until a plan is selected again. Cancelling a canceled subscription changes nothing and answers 200. immediate other than true or false is 422.`
      )
  )
  .add(
    HttpApiEndpoint.post("updateSubscription", "/orgs/:org_id/billing/subscriptions::update")
      .setPath(S.OrgPath)
      .setPayload(B.UpdateSubscriptionRequest)
      .addSuccess(B.Subscription)
      .annotate(OpenApi.Summary, "Change the plan or the cancel settings (owner only)")
      .annotate(
        OpenApi.Description,
        `${billingManage} plan_id changes the plan (as POST …/billing/subscriptions); cancel_now true cancels immediately; cancel_at_period_end schedules (true) or unschedules (false) the cancel. 400 with a string detail when no field asks for anything, or for contradictions: cancel_now with cancel_at_period_end true, plan_id with cancel_now true. Wrong types are 422.`
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "The org's billing subscription. Money is in US cents." })) {}

export class ProjectsGroup extends HttpApiGroup.make("projects")
  .add(
    HttpApiEndpoint.post("create", "/projects")
      .setPayload(P.CreateProjectRequest)
      .addSuccess(created(P.Project))
      .annotate(OpenApi.Summary, "Create a project in an org (projects.create)")
      .annotate(
        OpenApi.Description,
        "201 with the project. 409 when the org already has a project of that name (case-insensitive). 403 without projects.create, for a non-member, or when the org's plan allows no more projects (the detail names the limit and the plan). 503 when plan limits cannot be checked (retry)."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/projects")
      .setUrlParams(P.ProjectListQuery)
      .addSuccess(P.ProjectList)
      .annotate(OpenApi.Summary, "The org's projects (membership required)")
      .annotate(OpenApi.Description, "org_id is required (422 without it). 403 when the caller is not a member of the org.")
  )
  .add(
    HttpApiEndpoint.get("get", "/projects/:project_id")
      .setPath(P.ProjectPath)
      .addSuccess(P.Project)
      .annotate(OpenApi.Summary, "One project; another org's project is 404")
  )
  .add(
    HttpApiEndpoint.patch("update", "/projects/:project_id")
      .setPath(P.ProjectPath)
      .setPayload(P.UpdateProjectRequest)
      .addSuccess(P.Project)
      .annotate(OpenApi.Summary, "Change a project's name or description (projects.update)")
      .annotate(OpenApi.Description, "Only the fields given change. 400 when neither is given; 409 for a name the org already uses; 404 for another org's project.")
  )
  .add(
    HttpApiEndpoint.del("delete", "/projects/:project_id")
      .setPath(P.ProjectPath)
      .addSuccess(P.ProjectDeleted)
      .annotate(OpenApi.Summary, "Delete a project and its child resources (projects.delete)")
      .annotate(
        OpenApi.Description,
        "200 with a message. The project goes at once; the units owning its child resources delete them when they receive the project's deletion event. 403 without projects.delete (viewers and members); 404 for another org's project."
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Projects: org-scoped groupings of an org's resources." })) {}

const environmentsManage = "Needs environments.manage (admins and owners)."

export class EnvironmentsGroup extends HttpApiGroup.make("environments")
  .add(
    HttpApiEndpoint.get("list", "/environments")
      .setUrlParams(E.EnvironmentListQuery)
      .addSuccess(E.EnvironmentList)
      .annotate(OpenApi.Summary, "The org's environments (environments.read)")
      .annotate(OpenApi.Description, "org_id is required (422 without it). 403 when the caller is not a member of the org.")
  )
  .add(
    HttpApiEndpoint.post("create", "/environments")
      .setPayload(E.CreateEnvironmentRequest)
      .addSuccess(created(E.Environment))
      .annotate(OpenApi.Summary, "Create an environment (environments.manage)")
      .annotate(
        OpenApi.Description,
        `${environmentsManage} 201 with the environment. With private_link_id the environment's private link is active, and connector creates in it must name private_link_id. 409 for a name the org already uses; 403 when the org's plan allows no more environments.`
      )
  )
  .add(
    HttpApiEndpoint.post("createAwsSetupLink", "/environments/aws-setup-link")
      .setPayload(E.CreateAwsSetupLinkRequest)
      .addSuccess(E.AwsSetupLink)
      .annotate(OpenApi.Summary, "A CloudFormation quick-create link that connects an AWS account (environments.manage)")
      .annotate(
        OpenApi.Description,
        `${environmentsManage} Records a pending AWS account connection for the environment with a fresh external id (replacing an earlier one) and answers the quick-create link for the cross-account role that trusts it. Complete it with PATCH /v1/environments/aws-account-connections/{id}. 404 for another org's environment.`
      )
  )
  .add(
    HttpApiEndpoint.patch("updateAwsAccountConnection", "/environments/aws-account-connections/:aws_account_connection_id")
      .setPath(E.AwsAccountConnectionPath)
      .setPayload(E.UpdateAwsAccountConnectionRequest)
      .addSuccess(E.AwsAccountConnection)
      .annotate(OpenApi.Summary, "Complete an AWS account connection with the role the stack created (environments.manage)")
      .annotate(
        OpenApi.Description,
        `${environmentsManage} 400 when role_arn is not arn:aws:iam::<12 digits>:role/<path/name>, names another account than the connection's, or external_id is not the one the setup link carried. The default cloud adapter validates without calling AWS. 404 for another org's connection.`
      )
  )
  .add(
    HttpApiEndpoint.post("rotateDbProviderApiKey", "/environments/:environment_id/db-provider-api-key")
      .setPath(E.EnvironmentPath)
      .setPayload(E.RotateDbProviderApiKeyRequest)
      .addSuccess(E.DbProviderApiKeyRotated)
      .annotate(OpenApi.Summary, "Rotate the environment's database-provider API key (environments.manage)")
      .annotate(
        OpenApi.Description,
        `${environmentsManage} The new key replaces the old one, stored encrypted (AES-256-GCM envelope encryption); neither is ever returned: the answer shows a fingerprint, the last four characters and rotated_at. 404 for another org's environment.`
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Environments: where an org's engines run (cloud, region, AWS account, private link)." })) {}

const connectorsGate =
  "For service_name postgresql with byoc null or environment the preflight gate runs first, before anything is stored: when it does not pass the answer is 422 {detail, preflight} with the full preflight report (PreflightNotPassed). byoc self_managed and non-PostgreSQL services skip it."

export class ConnectorsGroup extends HttpApiGroup.make("connectors")
  .add(
    HttpApiEndpoint.post("preflight", "/connectors/preflight")
      .setPayload(C.PreflightRequest)
      .addSuccess(C.PreflightReport)
      .annotate(OpenApi.Summary, "Probe a source database and report whether it is ready to connect (connectors.create)")
      .annotate(
        OpenApi.Description,
        "200 whenever the source was probed: read preflight_pass (a failed gate is still 200). 400 for an unsupported service_name, invalid connection_details, or an environment with an active private link and no private_link_id. 403 without connectors.create. 500 for secret-store failures. Persists nothing."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/connectors")
      .setPayload(C.CreateConnectorRequest)
      .addSuccess(C.CreatedConnector)
      .addError(C.PreflightNotPassed)
      .annotate(OpenApi.Summary, "Create a connector (connectors.create)")
      .annotate(
        OpenApi.Description,
        `200 with the row plus can_update and can_delete; no schema_structure, no connection_details (stored encrypted). ${connectorsGate} 400 for invalid details, service, byoc or placement; 403 without permission or when the plan allows no more connectors.`
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/connectors")
      .setUrlParams(C.ConnectorListQuery)
      .addSuccess(C.ConnectorList)
      .annotate(OpenApi.Summary, "The org's connectors the caller can access (connectors.read)")
      .annotate(OpenApi.Description, "org_id is required (422 without it). 403 when the caller is not a member of the org.")
  )
  .add(
    HttpApiEndpoint.get("get", "/connectors/:connector_id")
      .setPath(C.ConnectorPath)
      .addSuccess(C.Connector)
      .annotate(OpenApi.Summary, "One connector with schema_structure and the computed flags; another org's connector is 404")
  )
  .add(
    HttpApiEndpoint.put("update", "/connectors/:connector_id")
      .setPath(C.ConnectorPath)
      .setPayload(C.UpdateConnectorRequest)
      .addSuccess(C.Connector)
      .addError(C.PreflightNotPassed)
      .annotate(OpenApi.Summary, "Rename a connector or replace its connection details (connectors.update)")
      .annotate(
        OpenApi.Description,
        "Changed connection_details are re-tested with the preflight gate (422 {detail, preflight} when it fails; nothing changes) and reset indexing_status. 400 when no field is given or the details are invalid; 403 without connectors.update; 404 for another org's connector."
      )
  )
  .add(
    HttpApiEndpoint.get("connectionDetails", "/connectors/:connector_id/connection-details")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectionDetailsResponse)
      .annotate(OpenApi.Summary, "The decrypted connection_details (connectors.update)")
      .annotate(OpenApi.Description, "403 for callers who may read but not update the connector; 404 for another org's connector.")
  )
  .add(
    HttpApiEndpoint.post("discover", "/connectors/:connector_id/discover")
      .setPath(C.ConnectorPath)
      .addSuccess(C.DiscoveryStarted, { status: 202 })
      .addError(C.DiscoveryPrerequisitesNotMet)
      .annotate(OpenApi.Summary, "Discover the source's schema in the background (connectors.update)")
      .annotate(
        OpenApi.Description,
        "202 with the operation handle (type connector_discovery, resource_id the connector) and the prerequisite checks. Prerequisites run first: the connector must be postgresql, its stored credentials must decrypt and the source must accept them; otherwise 422 {detail, prerequisites} and nothing is started. A discovery still pending or running for the connector is joined (same operation_id, joined true). The job reads every database of connection_details, reports progress per schema, writes schema_structure and bumps schema_version only when the structure changed (row estimates and sizes do not count). 403 without connectors.update; 404 for another org's connector; 503 when the work could not start (safe to retry)."
      )
  )
  .add(
    HttpApiEndpoint.post("selection", "/connectors/:connector_id/selection")
      .setPath(C.ConnectorPath)
      .setPayload(C.SelectionRequest)
      .addSuccess(C.Connector)
      .annotate(OpenApi.Summary, "Choose what to index (connectors.admin: admins and owners)")
      .annotate(
        OpenApi.Description,
        "Replaces the selection: selected_entity_paths as sent (trimmed, duplicates dropped), selected_schema_structure pruned to the selected tables (the whole structure for *), selection_schema_version = schema_version, selected_schema_version + 1 (so needs_reindex turns true). 400 with a string detail when nothing was discovered yet or a path is invalid or matches nothing. Foreign-key targets are not added. 403 without connectors.admin; 404 for another org's connector."
      )
  )
  .add(
    HttpApiEndpoint.put("replicaIdentityDecisions", "/connectors/:connector_id/replica-identity-decisions")
      .setPath(C.ConnectorPath)
      .setPayload(C.ReplicaIdentityDecisionsRequest)
      .addSuccess(C.Connector)
      .annotate(OpenApi.Summary, "Decide what happens to tables without a replica identity (connectors.admin)")
      .annotate(
        OpenApi.Description,
        "Replaces the whole set; tables left out revert to exclude. Answers the connector with the refreshed replica_identity_preflight {tables_without_replica_identity, decisions, unresolved, pass, decisions_version}. 400 with a string detail for a key that is no discovered table without a replica identity, a value other than exclude, add_pk or replica_identity_full, or before discovery. 403 without connectors.admin; 404 for another org's connector; 409 when another write or a discovery landed meanwhile (read the connector again and retry)."
      )
  )
  .add(
    HttpApiEndpoint.post("grantScript", "/connectors/:connector_id/grant-script")
      .setPath(C.ConnectorPath)
      .addSuccess(C.GrantScriptResponse)
      .addError(C.GrantScriptNotAvailable)
      .annotate(OpenApi.Summary, "The SQL that grants the connector's role what replication of the selection needs (connectors.read)")
      .annotate(
        OpenApi.Description,
        "Written for the provider preflight detected (rds and aurora: rds_replication; others: the REPLICATION attribute). 422 {detail} when the connector is not PostgreSQL, discovery has not run, no schemas are selected, or no username is stored; 404 for another org's connector; 500 when the stored details cannot be decrypted."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/connectors/:connector_id")
      .setPath(C.ConnectorPath)
      .setUrlParams(C.DeleteConnectorQuery)
      .addSuccess(C.ConnectorDeleteStarted, { status: 202 })
      .annotate(OpenApi.Summary, "Delete a connector in the background (connectors.delete: admins and owners)")
      .annotate(
        OpenApi.Description,
        "202 with the operation handle (type connector_delete, resource_id the connector). The job drops what Scion created on the source (the publication scion_<connector id> and replication slots named for the connector, in every database of connection_details), purges the connector's secrets (the connector_secret_purge step of the result), then deletes the connector (reads answer 404). A source that cannot be cleaned up fails the operation and the connector stays, unless force=true: then the cleanup is skipped and the result says so. 403 without connectors.delete; 404 for another org's connector; 409 while the deletion lock is on or another delete is pending or running; 503 when the work could not start (safe to retry)."
      )
  )
  .add(
    HttpApiEndpoint.post("lockDeletion", "/connectors/:connector_id/deletion-lock")
      .setPath(C.ConnectorPath)
      .addSuccess(C.Connector)
      .annotate(OpenApi.Summary, "Lock a connector against deletion (connectors.update)")
      .annotate(
        OpenApi.Description,
        "200 with the connector (deletion_locked true); idempotent; no body is read. 403 without connectors.update; 404 for another org's connector; 409 while a delete of the connector is in progress."
      )
  )
  .add(
    HttpApiEndpoint.del("unlockDeletion", "/connectors/:connector_id/deletion-lock")
      .setPath(C.ConnectorPath)
      .addSuccess(C.Connector)
      .annotate(OpenApi.Summary, "Remove a connector's deletion lock (connectors.update)")
      .annotate(
        OpenApi.Description,
        "200 with the connector (deletion_locked false); idempotent. 403 without connectors.update; 404 for another org's connector; 409 while a delete of the connector is in progress."
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Connectors: links to source databases (and code hosts)." })) {}

const refinementTitle = /^(minLength|maxLength|minItems|maxItems|length|pattern)\(/

/** Drops the titles Effect gives refinements ("maxLength(100)"): the constraints are already there. */
const dropRefinementTitles = (node: unknown): void => {
  if (Array.isArray(node)) return node.forEach(dropRefinementTitles)
  if (typeof node !== "object" || node === null) return
  const record = node as Record<string, unknown>
  if (typeof record.title === "string" && refinementTitle.test(record.title)) delete record.title
  Object.values(record).forEach(dropRefinementTitles)
}

/**
 * The OpenAPI document as HttpApi builds it, with its built-in 400 HttpApiDecodeError replaced:
 * malformed requests answer 422 ValidationError (see edge.ts). 422 is listed only where a request
 * carries something to validate.
 */
const openApiTransform = (spec: Record<string, any>): Record<string, any> => {
  // A literal colon is written "::" in a route ("subscriptions::update"); HttpApi's description
  // turns the second half into a parameter ("subscriptions:{update}"). Put the literal back.
  spec.paths = Object.fromEntries(Object.entries(spec.paths).map(([path, item]) => [path.replace(/([^/]):\{(\w+)\}/g, "$1:$2"), item]))
  for (const item of Object.values<Record<string, any>>(spec.paths)) {
    for (const op of Object.values<Record<string, any>>(item)) {
      const badRequest = op.responses?.["400"]
      if (badRequest !== undefined) {
        badRequest.description = "Bad request (see the detail)"
        badRequest.content = { "application/json": { schema: { $ref: "#/components/schemas/ApiError" } } }
      }
      if ((op.parameters ?? []).length === 0 && op.requestBody === undefined) delete op.responses["422"]
    }
  }
  for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete spec.components.schemas[name]
  spec.components.schemas.ApiError.description = "An error other than validation: detail says what went wrong. The status says which kind."
  dropRefinementTitles(spec)
  return spec
}

export class Api extends HttpApi.make("scion")
  .add(AuthGroup)
  .add(SessionGroup)
  .add(OrgsGroup)
  .add(MembersGroup)
  .add(InvitesGroup)
  .add(ApiKeysGroup)
  .add(OperationsGroup)
  .add(BillingPlansGroup)
  .add(BillingGroup)
  .add(ProjectsGroup)
  .add(EnvironmentsGroup)
  .add(ConnectorsGroup)
  .addError(ValidationError)
  .addError(BadRequest)
  .addError(Unauthorized)
  .addError(Forbidden)
  .addError(NotFound)
  .addError(Conflict)
  .addError(TooManyRequests)
  .addError(InternalError)
  .addError(Unavailable)
  .prefix("/v1")
  .annotateContext(
    OpenApi.annotations({
      title: "Scion",
      version: "0.1.0",
      description:
        "Postgres branching control plane. Every endpoint takes Authorization: Bearer <token> (a dashboard session token or an org API key) unless marked otherwise. Errors are {\"detail\": \"…\"}; malformed requests are 422 with {\"detail\": [{loc, msg, type}]}.",
      transform: openApiTransform
    })
  ) {}
