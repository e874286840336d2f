"""Fixed token id sequences for the logits tests (SmolLM2 vocab, 49152 ids).

S8: arbitrary in-vocab ids, including the last id (49151) and <|im_end|> (2).
S40, S130: ChatML prompts tokenised with llama.cpp (llama-cpp-python,
`tokenize(..., special=True)`), each extended by the model's own greedy
continuation to reach the length, so most positions have a confident top-1:
  S40:  system "You are a careful assistant." / user "What is the boiling
        point of water at sea level, in Celsius?" / assistant "The boiling
        point of water at"
  S130: SmolLM2 default system prompt / user: a multi-step sheep arithmetic
        word problem asking to think step by step / assistant "1. First, I
        will write down the steps"
Fixed lists rather than a tokenizer call, so the tests need neither the
engine's tokenizer nor llama.cpp.
"""

S8 = [17, 4000, 12345, 49151, 260, 31000, 2, 777]

S40 = [1, 9690, 198, 2683, 359, 253, 5649, 11173, 30, 2, 198, 1, 4093, 198, 1780, 314,
       260, 16891, 1225, 282, 913, 418, 3426, 1106, 28, 281, 20590, 47, 2, 198, 1, 520,
       9531, 198, 504, 16891, 1225, 282, 913, 418]

S130 = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018,
        411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 49, 13497, 553, 216, 33, 39, 11108,
        30, 2018, 564, 216, 41, 1658, 2025, 28, 284, 965, 384, 34680, 6757, 347, 800, 347,
        2612, 30, 10893, 253, 5670, 806, 4275, 767, 253, 3464, 282, 260, 20147, 28, 564,
        253, 20228, 6765, 216, 36, 11108, 338, 761, 41668, 618, 874, 1955, 30, 6545, 1833,
        411, 1833, 42, 808, 2965, 253, 1890, 1252, 28, 965, 12258, 971, 9044, 281, 1686,
        28, 284, 5087, 2545, 469, 20270, 411, 1891, 22271, 429, 260, 2988, 30, 1073, 800,
        11108, 1072, 260, 13497, 457, 1209, 47, 2, 198, 1, 520, 9531, 198, 33, 30, 3508,
        28, 339, 523, 2965, 1187, 260, 3301]

SEQUENCES = {"S8": S8, "S40": S40, "S130": S130}

assert len(S8) == 8 and len(S40) == 40 and len(S130) == 130
