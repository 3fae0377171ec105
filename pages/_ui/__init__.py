"""Streamlit helpers shared by the pages: state keys, cached engine calls, charts, sidebar."""
