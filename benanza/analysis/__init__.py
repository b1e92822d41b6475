"""Analysis: lower-bound latency, Benanza ratio, insights, what-if steps, roofline, prediction."""
