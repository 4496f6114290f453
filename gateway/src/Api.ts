import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Option, Schema, SchemaAST } from "effect"
import { BadRequest, Conflict, Forbidden, InternalError, NotFound, TooManyRequests, Unauthorized, Unavailable, ValidationError } from "./httpErrors.js"
import { Authentication, SessionAuthentication } from "./security.js"
import * as B from "./billingSchemas.js"
import * as Br from "./branchSchemas.js"
import * as H from "./codeHostSchemas.js"
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

export class EnginesGroup extends HttpApiGroup.make("engines")
  .add(
    HttpApiEndpoint.get("certificateAuthority", "/engines/ca-certificate")
      .addSuccess(HttpApiSchema.Text({ contentType: "application/x-pem-file" }).annotations({ description: "The authority's certificate, PEM" }))
      .annotate(OpenApi.Summary, "The certificate authority of the branching engines (PEM)")
      .annotate(
        OpenApi.Description,
        "Public: needs no token. Every branching engine (and its pooler) presents a certificate signed by this authority, naming the engine's host, so drivers that verify the server accept branch URLs once they trust it: " +
          "node-postgres (which treats sslmode=require as verify-full) with NODE_EXTRA_CA_CERTS=<file>, psql and libpq with sslrootcert=<file> and sslmode=verify-full. 404 when the engines have no common authority (each certificate is its own)."
      )
  )
  .annotateEndpoints(OpenApi.Override, extension)
  .annotateContext(
    OpenApi.annotations({ title: "engines", description: "Extension (not part of the service interface): what clients need to verify the branching engines.", override: extension })
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
        "202 with the operation handle (type connector_discovery, resource_id the connector) and the prerequisite checks. Prerequisites run first: the connector must be postgresql, its stored credentials must decrypt and the source must accept them; otherwise 422 {detail, prerequisites} and nothing is started. A discovery still pending or running for the connector is joined (same operation_id, joined true). The job reads every database of connection_details, reports progress per schema, writes schema_structure and bumps schema_version only when the structure changed (row estimates and sizes do not count). 400 while the connector is being deleted (not discoverable); 403 without connectors.update; 404 for another org's connector; 503 when the work could not start (safe to retry)."
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
  .add(
    HttpApiEndpoint.post("engineSetup", "/connectors/:connector_id/engine-setup")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectorOperationHandle, { status: 202 })
      .addSuccess(C.ConnectorWithMessage)
      .addError(C.EngineSetupPrerequisitesNotMet)
      .annotate(OpenApi.Summary, "Set up the connector's branching engine in the background (connectors.update)")
      .annotate(
        OpenApi.Description,
        "Returns at once. 202 with the operation handle (type connector_engine_setup; connector_rollout when a ready engine is behind the selection): the job provisions the engine (TLS on), applies the replica-identity decisions on the source, creates the publication and the logical slot on the source, the mirror's tables from the source catalog, the subscription with its initial copy, then writes readiness checks and sets branching_engine_status ready — or failed_validation with the failing checks in readiness-checks. setup_status, stage_label and progress move as it goes. 200 with the connector and a message when the engine already mirrors the current selection. 400 when the connector cannot have an engine (not postgresql); 403 without connectors.update; 404 for another org's connector; 409 while a setup or a delete is in progress; 422 {detail, prerequisites} when a prerequisite fails (nothing discovered or selected, a stale selection, unresolved replica-identity decisions); 503 when the work could not start (safe to retry)."
      )
  )
  .add(
    HttpApiEndpoint.post("index", "/connectors/:connector_id/index")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectorOperationHandle, { status: 202 })
      .addSuccess(C.ConnectorWithMessage)
      .addError(C.EngineSetupPrerequisitesNotMet)
      .annotate(OpenApi.Summary, "Apply the selection (connectors.update)")
      .annotate(
        OpenApi.Description,
        "No body. On a ready engine behind the selection (needs_reindex): 202 with a connector_rollout operation that re-runs engine setup's steps for the new selection (new tables created and copied, deselected ones dropped from the mirror), then last_indexed_version = selected_schema_version. Before any engine: 200 with the connector, the selection recorded as the one engine setup will mirror (last_indexed_version, indexing_status indexed). Nothing to apply: 200 with the connector as it is. 400 when nothing is selected; 403; 404; 409 while a setup or delete is in progress; 422 as engine-setup."
      )
  )
  .add(
    HttpApiEndpoint.get("readinessChecks", "/connectors/:connector_id/readiness-checks")
      .setPath(C.ConnectorPath)
      .setUrlParams(C.ReadinessChecksQuery)
      .addSuccess(C.ReadinessChecksList)
      .annotate(OpenApi.Summary, "Readiness evidence: one row per table and check of each attempt (connectors.read)")
      .annotate(OpenApi.Description, "Filters attempt_id, check_name, only_failed; limit 1..5000 (default 500), offset >= 0 (default 0); 422 outside those. 404 for another org's connector.")
  )
  .add(
    HttpApiEndpoint.get("readinessAttempts", "/connectors/:connector_id/readiness-attempts")
      .setPath(C.ConnectorPath)
      .setUrlParams(C.ReadinessAttemptsQuery)
      .addSuccess(C.ReadinessAttemptsList)
      .annotate(OpenApi.Summary, "Readiness attempt summaries, most recent first (connectors.read)")
      .annotate(OpenApi.Description, "limit 1..5000 (default 50); 422 outside. 404 for another org's connector.")
  )
  .add(
    HttpApiEndpoint.post("reset", "/connectors/:connector_id/reset")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectorOperationHandle, { status: 202 })
      .addError(C.EngineSetupPrerequisitesNotMet)
      .addError(C.EngineNotSetUp)
      .annotate(OpenApi.Summary, "Re-copy the mirror's data from a fresh slot, the schema kept (connectors.update; extension)")
      .annotate(
        OpenApi.Description,
        "Returns at once: 202 with a connector_reset operation. The job drops the engine's subscription and the source's slot, empties the mirrored tables, then makes a new slot and subscription and copies every table again, with readiness evidence; an open quarantine is closed by it. Branches are refused meanwhile (branching_engine_status setting_up), ready again when it completes. 403 without connectors.update; 404 for another org's connector; 409 while a setup, rollout, reset or delete of the connector runs; 422 when the engine was never set up, or {detail, prerequisites} when engine setup's prerequisites no longer hold; 503 when the work could not start."
      )
  )
  .add(
    HttpApiEndpoint.post("deepReset", "/connectors/:connector_id/deep-reset")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectorOperationHandle, { status: 202 })
      .addError(C.EngineSetupPrerequisitesNotMet)
      .addError(C.EngineNotSetUp)
      .annotate(OpenApi.Summary, "Rebuild the replication without downtime: a new pipeline in shadow, then a cutover (connectors.update; extension)")
      .annotate(
        OpenApi.Description,
        "Returns at once: 202 with a connector_deep_reset operation. It builds a new pipeline beside the active one — a new slot and publication on the source, a new mirror database on the engine with the DDL read fresh from the source, the initial copy and readiness evidence — while branches keep being cut from the current mirror. When it is validated, its result names a connector_cdc_cutover operation that switches branch creation to the new mirror in one step. The replaced pipeline keeps replicating for the rollback grace (POST …/replication-rollback switches back), then a connector_cdc_shadow_cleanup operation drops its mirror, slot and publication. A shadow that fails leaves the current mirror serving and is cleaned up. 403; 404 for another org's connector; 409 while a setup, rollout, reset, cutover, rollback or delete runs; 422 when the engine was never set up, or {detail, prerequisites}; 503 when the work could not start."
      )
  )
  .add(
    HttpApiEndpoint.post("replicationRollback", "/connectors/:connector_id/replication-rollback")
      .setPath(C.ConnectorPath)
      .addSuccess(C.ConnectorOperationHandle, { status: 202 })
      .addError(C.RollbackUnavailable)
      .addError(C.EngineNotSetUp)
      .annotate(OpenApi.Summary, "Switch branch creation back to the pipeline the last cutover replaced (connectors.update; extension)")
      .annotate(
        OpenApi.Description,
        "202 with a connector_replication_rollback operation, while the replaced pipeline is kept (the rollback grace, an hour by default); the pipeline rolled away from is kept for the same grace in turn. 403; 404 for another org's connector; 409 while other pipeline work runs; 422 when there is nothing to roll back to or the engine was never set up."
      )
  )
  .add(
    HttpApiEndpoint.get("schemaChanges", "/connectors/:connector_id/schema-changes")
      .setPath(C.ConnectorPath)
      .setUrlParams(C.SchemaChangesQuery)
      .addSuccess(C.SchemaChangesList)
      .annotate(OpenApi.Summary, "Schema changes seen on the source and what the mirror did with each, newest first (connectors.read; extension)")
      .annotate(
        OpenApi.Description,
        "Scion follows the source's schema. Where the connector's role may create event triggers (or a DBA ran the grant script's capture section), every DDL command touching the source is recorded there and applied by the mirror in commit order with the rows (mode captured): applied when it touched the selection, skipped when it did not, failed with the error. Otherwise the monitor reconciles drift it detects (mode reconciled). Applied changes bump schema_version; the selection follows where its paths still name tables. limit 1..5000 (default 500), offset >= 0 (default 0); 422 outside. 404 for another org's connector."
      )
  )
  .add(
    HttpApiEndpoint.get("quarantine", "/connectors/:connector_id/quarantine")
      .setPath(C.ConnectorPath)
      .addSuccess(C.QuarantineList)
      .annotate(OpenApi.Summary, "Quarantined replication of the connector (connectors.read)")
      .annotate(
        OpenApi.Description,
        "The monitor quarantines a connector's replication when it breaks (the source's slot lost, the subscription erroring or stopped, lag beyond the bound, a schema change it could not follow): it pauses the subscription, records why and the engine reads degraded until the monitor restores it. Released entries are not listed. 404 for another org's connector."
      )
  )
  .add(
    HttpApiEndpoint.post("releaseQuarantine", "/connectors/:connector_id/quarantine/:quarantine_id/release")
      .setPath(C.QuarantinePath)
      .addSuccess(C.QuarantineEntry)
      .annotate(OpenApi.Summary, "Release a quarantined replication (connectors.update)")
      .annotate(
        OpenApi.Description,
        "Idempotent: a released entry is answered again. The monitor then restores the pipeline (re-creating a lost slot and re-copying, or re-enabling the subscription) and deletes the released row. 403 without connectors.update; 404 for an unknown entry or another org's connector."
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Connectors: links to source databases (and code hosts)." })) {}

const codeHostAccess =
  "Works with the interface's body as given: an API key acts in its own org (connectors.create there); a dashboard session needs no org. The optional org_id (our extension) requires connectors.create in that org. Nothing is stored; tokens and keys are never logged or echoed. What GitHub answers is always 200 with a status; shape errors are 422; 403 without connectors.create."

export class CodeHostGroup extends HttpApiGroup.make("codeHost")
  .add(
    HttpApiEndpoint.post("validateRepo", "/connectors/validate-code-host-repo")
      .setPayload(H.ValidateRepoRequest)
      .addSuccess(H.RepoValidation)
      .annotate(OpenApi.Summary, "Check that a repository is reachable on the code host (connectors.create)")
      .annotate(
        OpenApi.Description,
        `Asks GitHub (GET /repos/{owner}/{name}, with code_host_token as a bearer token when given). valid: public. private: private and reachable with the token (valid true). invalid: 404 (without a token GitHub hides private repositories: the message asks for a code_host_token), or 401/403 refusing the token. error: unreachable, timed out, rate limited (403/429 with x-ratelimit-remaining 0) or 5xx (valid false; retry). repo must be owner/name with GitHub's characters, otherwise 422. ${codeHostAccess}`
      )
  )
  .add(
    HttpApiEndpoint.post("validateAuth", "/connectors/validate-code-host-auth")
      .setPayload(H.ValidateAuthRequest)
      .addSuccess(H.AuthValidation)
      .annotate(OpenApi.Summary, "Check code-host credentials: a personal access token or a GitHub App installation (connectors.create)")
      .annotate(
        OpenApi.Description,
        `pat: GET /user with access_token; username is the token's login; 401 is invalid. oauth (a GitHub App): an RS256 app JWT (iat now-60 s, exp now+540 s, iss app_id) signed with private_key, GET /app (username is the app's slug), then POST /app/installations/{installation_id}/access_tokens (the fresh token is revoked at once). An unparsable or non-RSA private_key, a JWT GitHub refuses (app_id and key not matching) and an unknown installation are invalid; unreachable, timed out, rate limited or 5xx is error. The fields the auth_type needs are required (422 naming the missing field). ${codeHostAccess}`
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ title: "code-host", description: "Connectors: validators for code-host (GitHub) connectors." })) {}

const branchesAccess =
  "A connector or branch of an org the caller does not belong to answers 404, never 403."

export class BranchesGroup extends HttpApiGroup.make("branches")
  .add(
    HttpApiEndpoint.post("create", "/branch/create")
      .setPayload(Br.CreateBranchRequest)
      .setHeaders(Br.IdempotencyHeaders)
      .addSuccess(Br.BranchOperationHandle, { status: 202 })
      .addError(Br.EngineNotReady)
      .addError(Br.MaskingIncomplete)
      .annotate(OpenApi.Summary, "Create a branch of a connector's mirror in the background (branches.create)")
      .annotate(
        OpenApi.Description,
        `202 with the branch_create operation handle (resource_id is the branch id); poll it: on completed, result is the Branch with branch_url (check it is present and non-empty; fail closed otherwise). 400 with a string detail for a missing connector_id, name or service_type, service_type other than postgres (postgresql says to send postgres), an invalid name or idempotency key. X-Idempotency-Key (or Idempotency-Key), per org, kept 24 hours: the same connector, service type and name with the same key answers the first request's handle again with the header X-Idempotency-Replay: true (status is the operation's current status); the key with a different request is 409. 409 while a create of the same connector and name is still pending or running, or when the connector already has a live branch of that name. 422 {detail} when the connector's engine is not ready to branch. 403 without branches.create; ${branchesAccess} 503 when the work could not start (safe to retry).`
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/branches")
      .setUrlParams(Br.BranchListQuery)
      .addSuccess(Br.BranchList)
      .annotate(OpenApi.Summary, "The connector's branches that are not deleted, newest first (branches.read)")
      .annotate(OpenApi.Description, `connector_id is required (422 without it). branch_url only for callers holding branches.create. ${branchesAccess}`)
  )
  .add(
    HttpApiEndpoint.get("get", "/branches/:branch_id")
      .setPath(Br.BranchPath)
      .addSuccess(Br.Branch)
      .annotate(OpenApi.Summary, "One branch (branches.read)")
      .annotate(OpenApi.Description, `branch_url (and the pooled URLs) again for an active branch, for callers holding branches.create; null for others. A deleted branch is 404. ${branchesAccess}`)
  )
  .add(
    HttpApiEndpoint.del("delete", "/branches/:branch_id")
      .setPath(Br.BranchPath)
      .addSuccess(Br.BranchDeleteHandle, { status: 202 })
      .annotate(OpenApi.Summary, "Delete a branch in the background (branches.delete)")
      .annotate(
        OpenApi.Description,
        `202 with the branch_delete operation handle; the job drops the branch's database (closing its sessions) and role, then the branch reads 404. 409 while its create or another delete is pending or running, and while the branch is protected. 403 without branches.delete; ${branchesAccess} 503 when the work could not start.`
      )
  )
  .add(
    HttpApiEndpoint.get("schemaDiff", "/branches/:branch_id/schema-diff")
      .setPath(Br.BranchPath)
      .addSuccess(Br.SchemaDiff)
      .annotate(OpenApi.Summary, "Extension: what a migration on the branch changed, as SQL for the source (branches.read)")
      .annotate(
        OpenApi.Description,
        `The statements that take the mirror's schema (the selected tables' schemas) to the branch's current one — tables, columns, types, defaults, not-null, constraints, indexes and enums — as one SQL text and as a structured list, in the order to run them. Constraints and indexes are compared by name and definition (a changed one is dropped and added). 409 unless the branch is active. ${branchesAccess}`
      )
  )
  .add(
    HttpApiEndpoint.post("reset", "/branches/:branch_id/reset")
      .setPath(Br.BranchPath)
      .addSuccess(Br.BranchResetHandle, { status: 202 })
      .addError(Br.EngineNotReady)
      .annotate(OpenApi.Summary, "Extension: reset a branch to the mirror's current data and schema (branches.delete)")
      .annotate(
        OpenApi.Description,
        `202 with a branch_reset operation handle (an operation type we add to the interface's). The job ends the branch's open sessions, drops its database and cuts it again from the mirror: on completed, result is the Branch, with the same id, name, role, password and URL. 409 while the branch is protected, not active, being deleted, or already being reset. 422 {detail} when the connector's engine is not ready to branch. 403 without branches.delete; ${branchesAccess} 503 when the work could not start.`
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/branches/:branch_id")
      .setPath(Br.BranchPath)
      .setPayload(Br.UpdateBranchRequest)
      .addSuccess(Br.Branch)
      .annotate(OpenApi.Summary, "Extension: rename a branch, protect it, or set or clear its expiry (branches.create)")
      .annotate(
        OpenApi.Description,
        `200 with the Branch. Absent fields stay; expires_at null keeps the branch for good. The URL and password do not change with the name. 400 with a string detail for an invalid name or an expiry in the past or more than a year ahead; 422 for wrong types. 409 when another live branch of the connector has the name, or while the branch is being deleted. 403 without branches.create; ${branchesAccess}`
      )
  )
  .add(
    HttpApiEndpoint.post("createSnapshot", "/connectors/:connector_id/snapshots")
      .setPath(Br.SnapshotConnectorPath)
      .setPayload(Br.CreateSnapshotRequest)
      .addSuccess(Br.SnapshotCreateHandle, { status: 202 })
      .addError(Br.EngineNotReady)
      .annotate(OpenApi.Summary, "Extension: snapshot the connector's mirror (branches.create)")
      .annotate(
        OpenApi.Description,
        `202 with a snapshot_create operation (an operation type we add): a named, immutable copy of the mirror at this instant, with its data_as_of; on completed, result is the Snapshot. Branches cut from it (POST /v1/branch/create with snapshot_id) start from the same data every time and do not pause replication. Snapshots count against the plan's branch limit with the org's branches (403 at the limit). 400 for an invalid name; 409 when the connector has a live snapshot of that name; 422 {detail} when the engine is not ready; 403 without branches.create; ${branchesAccess} 503 when the work could not start.`
      )
  )
  .add(
    HttpApiEndpoint.get("listSnapshots", "/connectors/:connector_id/snapshots")
      .setPath(Br.SnapshotConnectorPath)
      .addSuccess(Br.SnapshotList)
      .annotate(OpenApi.Summary, "Extension: the connector's snapshots, newest first (branches.read)")
  )
  .add(
    HttpApiEndpoint.get("getSnapshot", "/snapshots/:snapshot_id")
      .setPath(Br.SnapshotPath)
      .addSuccess(Br.Snapshot)
      .annotate(OpenApi.Summary, "Extension: one snapshot (branches.read)")
      .annotate(OpenApi.Description, "404 for an unknown or deleted snapshot and for another org's.")
  )
  .add(
    HttpApiEndpoint.del("deleteSnapshot", "/snapshots/:snapshot_id")
      .setPath(Br.SnapshotPath)
      .addSuccess(Br.SnapshotDeleteHandle, { status: 202 })
      .annotate(OpenApi.Summary, "Extension: delete a snapshot (branches.delete)")
      .annotate(
        OpenApi.Description,
        "202 with a snapshot_delete operation that drops the snapshot's database; branches already cut from it stay. 409 while it is being made or a branch is being cut from it; 404 for an unknown snapshot or another org's; 403 without branches.delete."
      )
  )
  .add(
    HttpApiEndpoint.get("getMaskingRules", "/connectors/:connector_id/masking-rules")
      .setPath(Br.MaskingConnectorPath)
      .addSuccess(Br.MaskingRulesWithSuggestions)
      .annotate(OpenApi.Summary, "The connector's masking rules (branches.read)")
  )
  .add(
    HttpApiEndpoint.put("setMaskingRules", "/connectors/:connector_id/masking-rules")
      .setPath(Br.MaskingConnectorPath)
      .setPayload(Br.MaskingRules)
      .addSuccess(Br.MaskingConfiguration)
      .annotate(OpenApi.Summary, "Replace the connector's masking rules (connectors.update)")
      .annotate(
        OpenApi.Description,
        `Per column ({schema, table, column, method}); applied in every branch created afterwards, before the operation completes (masked_ready_at). Masking is deterministic, so joins on masked columns still match. A rule naming a column the mirror does not have is skipped. 400 for a repeated column or an unknown method; 403 without connectors.update; ${branchesAccess}`
      )
  )
  .middleware(Authentication)
  .annotateContext(OpenApi.annotations({ description: "Branches: writable copies of a connector's mirror, each with its own connection URL." })) {}

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
  .add(EnginesGroup)
  .add(BillingGroup)
  .add(ProjectsGroup)
  .add(EnvironmentsGroup)
  .add(ConnectorsGroup)
  .add(BranchesGroup)
  .add(CodeHostGroup)
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
        "Postgres branching control plane. Every endpoint takes Authorization: Bearer <token> (a dashboard session token or an org API key) unless marked otherwise. Errors are {\"detail\": \"…\"}; malformed requests are 422 with {\"detail\": [{loc, msg, type}]}. " +
        "Rate limits: per API key or signed-in user (default 1200 a minute), per client address for sign-up, login and email verification (60), and per caller for the code-host validators (60); failed logins slow down per account and address. " +
        "Limited responses carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (seconds); a refusal is 429 with Retry-After (seconds). Every response carries x-request-id.",
      transform: openApiTransform
    })
  ) {}
