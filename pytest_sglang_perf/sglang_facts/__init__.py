"""sglang_facts"""
