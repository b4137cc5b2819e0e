"""The studio as a server (studio/server/): the registry, limits, batching, slots, sessions, uploads, the API."""
