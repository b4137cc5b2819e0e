"""The studio as a server: the models on offer (registry), what one visitor may ask (limits), requests decoded
together (batching) and before the live training run (priority), heavy work in fair slots (slots), results shared
by every session (recent_results), compiled decoding steps kept warm (compiled_models), sessions forgotten
(sessions), uploaded checkpoints (uploads), the API for scripts (api), and the guard every callback runs in."""
