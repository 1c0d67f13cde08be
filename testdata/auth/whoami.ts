// What a protected server's plugin learns of its caller: ctx.auth, from the verified token (never the token).
export default {
  description: "Who is calling: the verified token's subject, scopes and client",
  run: (_args: unknown, ctx: { auth?: { sub?: string; scopes: string[]; clientId?: string } }) =>
    JSON.stringify({ sub: ctx.auth?.sub, scopes: ctx.auth?.scopes, clientId: ctx.auth?.clientId }),
};
