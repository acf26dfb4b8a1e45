"""Fusion tuning: hybrids re-fused from their components' stored runs (:mod:`.refusion`), their weights or RRF k tuned
on a seeded dev half and reported on the other half (:mod:`.fusion_sweep`)."""
