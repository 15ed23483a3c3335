"""Who may connect and do what: TLS, SASL (PLAIN, SCRAM, OAUTHBEARER), ACLs and the authorizer, SCRAM
users. Must not import the server, the runtime or the API handlers."""
