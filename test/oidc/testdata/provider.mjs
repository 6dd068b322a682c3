// The real authorization server connecta's tests run: oidc-provider (pinned
// in package.json) on a free 127.0.0.1 port, with dynamic client
// registration, PKCE (always required), refresh tokens, revocation and
// resource indicators (JWT access tokens whose audience is the resource).
//
// Started by the Go helper in test/oidc. Configuration is one JSON object in
// $CONNECTA_OIDC_CONFIG; the first stdout line is {"issuer": "..."} once it
// listens. It exits when stdin closes, so it never outlives the test that
// started it.
//
// Login and consent are a minimal scripted pair of HTML forms a test plays
// with an HTTP client and a cookie jar: POST login=<account id>, then POST
// to .../confirm (allow) or .../abort (deny, error=access_denied).
import crypto from "node:crypto";
import http from "node:http";
import Provider, { errors } from "oidc-provider";

const cfg = JSON.parse(process.env.CONNECTA_OIDC_CONFIG || "{}");
const accounts = cfg.accounts || { alice: { email: "alice@example.com", email_verified: true, name: "Alice" } };
const resourceScopes = cfg.resourceScopes || ["mcp:tools"];
const accessTokenTTL = cfg.accessTokenTTL || 300;
const refreshTokenTTL = cfg.refreshTokenTTL || 86400;

function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;
}

function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 65536) throw new Error("form too large");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

const server = http.createServer();
server.listen(cfg.port || 0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const { privateKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: `${cfg.keyIdPrefix || "test"}-es256`, alg: "ES256", use: "sig" };
  // RS256 too: it is the default for ID tokens and clients that name no alg.
  const rsa = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
  const rsaJwk = { ...rsa.export({ format: "jwk" }), kid: `${cfg.keyIdPrefix || "test"}-rs256`, alg: "RS256", use: "sig" };

  // Pairwise subjects (cfg.pairwise): ID tokens per client, access tokens
  // per resource — PairwiseSubject in provider.go is the same formula.
  const pairwise = (account, audience) =>
    "pw-" + crypto.createHash("sha256").update(`${account}|${audience}`).digest("hex").slice(0, 16);
  const provider = new Provider(issuer, {
    clients: (cfg.clients || []).map((c) => (cfg.pairwise ? { ...c, subject_type: "pairwise" } : c)),
    ...(cfg.pairwise
      ? {
          subjectTypes: ["public", "pairwise"],
          clientDefaults: { grant_types: ["authorization_code"], id_token_signed_response_alg: "RS256", response_types: ["code"], token_endpoint_auth_method: "client_secret_basic", subject_type: "pairwise" },
          pairwiseIdentifier: async (_ctx, accountId, client) => pairwise(accountId, client.clientId),
        }
      : {}),
    jwks: { keys: [rsaJwk, jwk] },
    cookies: { keys: [crypto.randomBytes(32).toString("hex")] },
    scopes: ["openid", "offline_access", "email", "profile", "groups", ...resourceScopes],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"], groups: ["groups"] },
    pkce: { required: () => true },
    ttl: {
      AccessToken: accessTokenTTL,
      AuthorizationCode: 60,
      ClientCredentials: accessTokenTTL,
      Grant: refreshTokenTTL,
      IdToken: accessTokenTTL,
      Interaction: 600,
      RefreshToken: refreshTokenTTL,
      Session: refreshTokenTTL,
    },
    ...(cfg.pairwise
      ? {
          formats: {
            customizers: {
              jwt: async (_ctx, token, jwt) => {
                if (token.accountId) jwt.payload.sub = pairwise(token.accountId, jwt.payload.aud);
              },
            },
          },
        }
      : {}),
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      clientIdMetadataDocument: cfg.clientIdMetadataDocument
        ? { enabled: true, ack: "draft-02" }
        : { enabled: false },
      resourceIndicators: {
        enabled: true,
        // oidc-provider's defaults: a token request without a resource
        // parameter gets the granted resource only when it is the one
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        getResourceServerInfo: async (_ctx, resource) => {
          if (cfg.resources && !cfg.resources.includes(resource)) throw new errors.InvalidTarget();
          return {
            audience: resource,
            scope: resourceScopes.join(" "),
            accessTokenTTL,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          };
        },
      },
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    extraTokenClaims: async (_ctx, token) => {
      const a = accounts[token.accountId];
      if (!a || token.kind !== "AccessToken") return undefined;
      const { email, email_verified, groups } = a;
      return { email, email_verified, groups };
    },
    findAccount: async (_ctx, id) => {
      const a = accounts[id];
      if (!a) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...a }) };
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError: async (ctx, out) => {
      ctx.type = "html";
      ctx.body = page("Error", `<pre>${escapeHTML(JSON.stringify(out))}</pre>`);
    },
  });

  const callback = provider.callback();
  server.on("request", async (req, res) => {
    const m = /^\/interaction\/([^/?]+)(\/(login|confirm|abort))?/.exec(req.url);
    if (!m) return callback(req, res);
    try {
      const details = await provider.interactionDetails(req, res);
      const uid = escapeHTML(m[1]);
      const action = m[3];
      if (!action) {
        res.setHeader("content-type", "text/html; charset=utf-8");
        if (details.prompt.name === "login") {
          res.end(page("Sign in", `<form method="post" action="/interaction/${uid}/login"><input name="login"><button>Sign in</button></form>`));
        } else {
          res.end(page("Allow access", `<p>${escapeHTML(details.params.client_id)} asks for ${escapeHTML(details.params.scope || "")}</p>` +
            `<form method="post" action="/interaction/${uid}/confirm"><button>Allow</button></form>` +
            `<form method="post" action="/interaction/${uid}/abort"><button>Deny</button></form>`));
        }
        return;
      }
      if (req.method !== "POST") {
        res.statusCode = 405;
        return res.end();
      }
      const form = await readForm(req);
      let result;
      if (action === "login") {
        const login = form.get("login");
        if (!accounts[login]) {
          res.statusCode = 400;
          res.setHeader("content-type", "text/html; charset=utf-8");
          return res.end(page("Unknown account", `<p>${escapeHTML(login)}</p>`));
        }
        result = { login: { accountId: login } };
      } else if (action === "abort") {
        result = { error: "access_denied", error_description: "the user denied access" };
      } else {
        const { prompt: { details: missing }, params, session } = details;
        let grant = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
        if (!grant) grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
        if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
        if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
        for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
          grant.addResourceScope(indicator, scopes.join(" "));
        }
        result = { consent: { grantId: await grant.save() } };
      }
      await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
    } catch (err) {
      res.statusCode = 400;
      res.setHeader("content-type", "text/html; charset=utf-8");
      res.end(page("Interaction failed", `<pre>${escapeHTML(err.message)}</pre>`));
    }
  });

  process.stdout.write(JSON.stringify({ issuer }) + "\n");
});

process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
