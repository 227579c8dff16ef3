"""placeholder replaced below"""
def test_a_project_without_chromium_gets_the_status_text_and_the_tools_say_why() -> None:
    pass
